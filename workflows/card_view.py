"""The card workflow's state and how operators see it: the search attributes (CardId,
CardStage, Repo, Tenant, CardStatus, StageOutcome), the current details in the Temporal UI, and
the words that say why a retry or cancel has nothing to do. The base of CardWorkflow's parts
(card_lane.py, card_inbox.py, card.py); it runs no activity."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        DEFAULT_MAX_HISTORY_EVENTS,
        CancelRequest,
        CardComment,
        CardStart,
        CardState,
        Transition,
    )
    from cardloop.workflows import transitions, versions
    from cardloop.workflows.local_gate import LocalGate

CARD_ID = SearchAttributeKey.for_keyword(names.SA_CARD_ID)
CARD_STAGE = SearchAttributeKey.for_keyword(names.SA_CARD_STAGE)
REPO = SearchAttributeKey.for_keyword(names.SA_REPO)
TENANT = SearchAttributeKey.for_keyword(names.SA_TENANT)
CARD_STATUS = SearchAttributeKey.for_keyword(names.SA_CARD_STATUS)
STAGE_OUTCOME = SearchAttributeKey.for_keyword(names.SA_STAGE_OUTCOME)


def search_attributes(start: CardStart, stage: str, status: str | None = None) -> TypedSearchAttributes:
    """The card's attributes at its start (status "new"), or a stage run's (status None: a stage
    run's status is its execution status; its outcome is upserted when it ends)."""
    pairs = [SearchAttributePair(CARD_ID, start.ref.key), SearchAttributePair(CARD_STAGE, stage),
             SearchAttributePair(TENANT, start.ref.tenant)]
    if start.repo:
        pairs.append(SearchAttributePair(REPO, start.repo))
    if status is not None:
        pairs.append(SearchAttributePair(CARD_STATUS, status))
    return TypedSearchAttributes(pairs)


class CardView:
    def __init__(self) -> None:
        self.state = CardState()
        self.pending: list[Transition] = []
        self.comments: list[CardComment] = []
        self.card_key = ""
        self.title = ""
        self.url: str | None = None
        self.max_events = DEFAULT_MAX_HISTORY_EVENTS
        # Signals that arrive before the state is loaded wait here: dedup needs the state.
        self.loaded = False
        self.inbox: list[Transition | CardComment] = []
        # `card cancel` asked to stop the running stage (None: nobody did).
        self.stop: CancelRequest | None = None
        # The board lane (versions.BOARD_LANE): board writes waiting, run in order by one task
        # beside the loop; what each run's started comment found (on the board, a dry run).
        self._lane: list[Callable[[], Awaitable[None]]] = []
        self._lane_busy = False
        self._lane_used = False
        self._lane_task: asyncio.Future[None] | None = None
        self._opened: dict[int, tuple[bool, bool]] = {}
        # Who is inside a local activity (versions.LOCAL_ACTIVITIES_ALONE; local_gate.py says why).
        self._gate = LocalGate()
        self._memo_due: dict[str, str] | None = None
        self._memo_task: asyncio.Future[None] | None = None

    def _not_running(self) -> str:
        st = self.state
        if st.status == "blocked":
            return f"the card is blocked in {st.stage}, no stage runs"
        if st.status == "done":
            return "the card is done"
        if not st.history:
            return "the card has run no stage yet"
        last = st.history[-1]
        return f"no stage runs; the last run ({last.stage} run {last.run}) ended {last.outcome}"

    def _not_failed(self) -> str:
        st = self.state
        if self.pending:
            return f"a move to {self.pending[-1].to} is already queued"
        if st.status == "running":
            return f"the card is running {st.stage} now (stage run {st.stage_runs})"
        if st.status == "blocked":
            return f"the card is blocked in {st.stage}: answer it with `cardloop card say` or move it"
        if st.status == "done":
            return "the card is done"
        if not st.history:
            return "the card has run no stage yet"
        last = st.history[-1]
        return f"its last stage run ({last.stage} run {last.run}) ended {last.outcome}, not failed"

    def _set_stage(self, start: CardStart, stage: str, status: str) -> None:
        self.state.stage = stage
        self.state.status = status  # type: ignore[assignment]
        self._publish(self._stage_shown())

    def _stage_shown(self) -> list:
        """The CardStage upsert the state asks for ("blocked" for a blocked card), none when
        Temporal already holds it."""
        shown = "blocked" if self.state.status == "blocked" else self.state.stage
        return [CARD_STAGE.value_set(shown)] if shown and self._attribute(CARD_STAGE) != shown else []

    def _publish(self, updates: list) -> None:
        """One upsert (each is an event) of `updates` and, on runs that keep them, the card's
        status and last outcome where they changed."""
        if versions.patched(versions.STATUS_ATTRIBUTES):
            status = transitions.card_status(self.state)
            if self._attribute(CARD_STATUS) != status:
                updates.append(CARD_STATUS.value_set(status))
            outcome = self.state.history[-1].outcome if self.state.history else None
            if outcome and self._attribute(STAGE_OUTCOME) != outcome:
                updates.append(STAGE_OUTCOME.value_set(outcome))
        if updates:
            workflow.upsert_search_attributes(updates)

    @staticmethod
    def _attribute(key: SearchAttributeKey[str]) -> str | None:
        return workflow.info().typed_search_attributes.get(key)

    def _details(self) -> None:
        st = self.state
        doing = {"running": "working on", "blocked": "BLOCKED in", "idle": "waiting after",
                 "done": "finished"}[st.status]
        cur = st.current if st.status == "running" else None
        tokens_in = st.input_tokens + (cur.input_tokens if cur else 0)
        tokens_out = st.output_tokens + (cur.output_tokens if cur else 0)
        cost = st.cost_usd + (cur.cost_usd if cur else 0.0)
        turn = f", iteration {cur.iteration}" if cur else ""
        extra = f" Blocked because: {st.blocked_reason}" if st.status == "blocked" else ""
        if st.auto_retry is not None:
            plan = st.auto_retry
            extra += (f" Failed for a transient cause: retrying {plan.stage} automatically at "
                      f"{plan.due:%H:%M:%S} UTC (retry {plan.attempt} of {plan.of}).")
        elif transitions.failed_run(st, moves_queued=bool(self.pending)) is not None:
            extra += " Failed: `cardloop card retry` runs the stage again."
        last = cur.last_result if cur and cur.last_result else st.last_result
        if st.status == "running" and not (cur and cur.last_result):
            # No reply of this run yet: the model call may be waiting for a retry, which only the
            # stage run's pending activity shows (an empty "Last: " read as if nothing happened).
            last = (f"no reply yet in this run; the stage run {workflow.info().workflow_id}/{st.stage_runs}-"
                    f"{st.stage} shows what it waits for (a retrying model call: its pending activity)")
        elif not last:
            last = "nothing yet"
        on_board = f"\nBoard: {st.board[:500]}" if st.board else ""
        workflow.set_current_details(
            f"{self.title}\n\n{doing} **{st.stage or 'no stage yet'}** (stage run {st.stage_runs}{turn}). "
            f"Tokens: {tokens_in:,} in, {tokens_out:,} out. Cost: ${cost:.4f}.{extra}\n"
            f"Last: {last[:300]}{on_board}"
        )
