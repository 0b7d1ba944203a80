"""CardWorkflow: one per card, the card's state machine over stages.

Transitions and comments arrive as signals (signal-with-start creates the workflow on the
first one). A transition to another stage while one runs cancels the running StageWorkflow
(its work is already in the store) and starts the new one; one to the running stage leaves it
running; a repeated delivery id is
applied once, also across continue-as-new. Search attributes (CardId, CardStage, Repo,
Tenant, CardStatus, StageOutcome; stage runs get the first four and their outcome), the memo
and the current details keep the Temporal UI the operator's view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        DEFAULT_MAX_HISTORY_EVENTS,
        AppendInput,
        CancelRequest,
        CardComment,
        CardStart,
        CardState,
        Retitle,
        RetryRequest,
        SavedState,
        SaveStateInput,
        StageInput,
        StageProgress,
        StageRun,
        StageSettings,
        Transition,
        delivery_key,
    )
    from cardloop.workflows import board, policies, transitions, versions
    from cardloop.workflows.stage import StageWorkflow

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


def _card_cancelled() -> bool:
    """True once someone asked Temporal to cancel this card workflow (its main task)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@workflow.defn(name=names.CARD_WORKFLOW)
class CardWorkflow:
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

    # --- signals and queries -------------------------------------------------------------

    @workflow.signal(name=names.SIGNAL_TRANSITION)
    def transition(self, t: Transition) -> None:
        if not self.loaded:
            self.inbox.append(t)
        elif not self._seen(t.delivery_id):
            self.pending.append(t)

    @workflow.signal(name=names.SIGNAL_COMMENT)
    def comment(self, c: CardComment) -> None:
        if not self.loaded:
            self.inbox.append(c)
        elif not self._seen(c.delivery_id):
            self.comments.append(c)

    @workflow.signal(name=names.SIGNAL_RETITLE)
    def retitle(self, t: Retitle) -> None:
        """The card was renamed on its board: the memo and details the operator reads follow,
        and a continue-as-new carries the new title (histories recorded before this signal
        existed hold none of it, so they replay unchanged)."""
        self.title, self.url = t.title, t.url
        workflow.upsert_memo({"title": t.title, "url": t.url or ""})
        if self.loaded:
            self._details()

    @workflow.signal(name=names.SIGNAL_STAGE_PROGRESS)
    def stage_progress(self, progress: StageProgress) -> None:
        if self.state.status == "running":
            self.state.current = progress
            self.state.iteration = progress.iteration
            self._details()

    @workflow.update(name=names.UPDATE_RETRY)
    def retry(self, req: RetryRequest) -> str:
        """Run the failed stage again on this workflow (its history and the store's stay);
        answers the stage's name."""
        run = transitions.failed_run(self.state, moves_queued=bool(self.pending))
        if run is None:  # two requests admitted together: the first one queued the move
            raise ApplicationError(f"nothing to retry: {self._not_failed()}", type="NothingToRetry")
        self.transition(transitions.retry_transition(run, actor=req.actor))
        return run.stage

    @retry.validator
    def _retry_allowed(self, req: RetryRequest) -> None:
        # A refused update leaves no trace in the history: the caller gets the reason.
        if not self.loaded:
            raise ValueError("the card's workflow is starting; try again in a moment")
        if transitions.failed_run(self.state, moves_queued=bool(self.pending)) is None:
            raise ValueError(f"nothing to retry: {self._not_failed()}")

    @workflow.update(name=names.UPDATE_CANCEL)
    async def cancel_stage(self, req: CancelRequest) -> StageRun:
        """Stop the running stage; answers its run as recorded once it stopped (its messages,
        ledger rows and pushed commits stay; the card waits, idle, for the next move)."""
        run = self.state.stage_runs
        if self.stop is None:
            self.stop = req
        await workflow.wait_condition(lambda: bool(self.state.history) and self.state.history[-1].run >= run)
        return self.state.history[-1]

    @cancel_stage.validator
    def _cancel_allowed(self, req: CancelRequest) -> None:
        if not self.loaded:
            raise ValueError("the card's workflow is starting; try again in a moment")
        if self.state.status != "running":
            raise ValueError(f"nothing to cancel: {self._not_running()}")

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

    @workflow.query(name=names.QUERY_STATE)
    def get_state(self) -> CardState:
        return self.state

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

    def _seen(self, delivery_id: str) -> bool:
        delivery_id = delivery_key(delivery_id)
        seen = self.state.seen_deliveries
        if delivery_id in seen:
            return True
        seen.append(delivery_id)
        del seen[: max(0, len(seen) - policies.MAX_SEEN_DELIVERIES)]
        return False

    # --- the state machine --------------------------------------------------------------

    @workflow.run
    async def run(self, start: CardStart) -> CardState:
        versions.decide_at_start()
        self.card_key = start.ref.key
        self.title, self.url = start.title, start.url
        self.max_events = start.max_history_events
        await self._load_state(start)
        if self.state.stage_runs and start.state is None:
            self._publish([])  # a card reopened by a move or comment: its status, not "new"
        self.pending = list(start.pending) + self.pending
        if start.state is None and workflow.info().continued_run_id is None and not workflow.memo():
            # Started by something other than CardService (which sets the memo at start).
            workflow.upsert_memo({"title": start.title, "url": start.url or ""})
        while True:
            await self._wait_for_work()
            await self._flush_comments()
            if not self.pending:
                then = transitions.after_comments(self.state)
                if then == "finish":
                    if await self._close():
                        return self.state  # a comment on a finished card: recorded, nothing to run
                    continue
                if then == "wait":
                    self._details()
                    if self._should_continue_as_new():
                        await self._continue_as_new(start)
                    continue
                self.pending.append(then)
            target = transitions.pick_move(self.pending)
            self.pending.clear()
            if target.to == "done":
                self._set_stage(start, "done", "done")
                self._details()
                if not self.comments and not self.pending and await self._close():
                    return self.state
                continue
            await self._run_stage(start, target)
            if not self.pending and self._should_continue_as_new():
                await self._continue_as_new(start)

    async def _wait_for_work(self) -> None:
        """Until a move or comment arrives, or a planned automatic retry is due (a durable
        timer: it survives worker restarts and continue-as-new, which carries the plan)."""
        plan = self.state.auto_retry
        if plan is None or not versions.patched(versions.AUTO_RETRY):
            await workflow.wait_condition(lambda: bool(self.pending or self.comments))
            return
        left = (plan.due - workflow.now()).total_seconds()
        if left > 0:
            try:
                await workflow.wait_condition(lambda: bool(self.pending or self.comments), timeout=left,
                                              timeout_summary=f"automatic retry of {plan.stage}")
                return
            except TimeoutError:
                pass
        self.state.auto_retry = None
        self.transition(transitions.auto_retry_transition(plan))

    async def _load_state(self, start: CardStart) -> None:
        """The state carried by continue-as-new, or the one the card's last run closed with
        (the store holds it: the next run starts only after the last one closed)."""
        if start.state is not None:
            self.state = start.state
        elif workflow.info().continued_run_id is None and versions.patched(versions.STATE_IN_STORE):
            saved = await workflow.execute_local_activity(
                names.LOAD_STATE, start.ref.key, result_type=SavedState, **policies.LOCAL,
                summary="the card's state when its last run closed")
            if saved.state is not None:
                self.state = saved.state
        self.loaded = True
        for waiting in self.inbox:
            if isinstance(waiting, Transition):
                self.transition(waiting)
            else:
                self.comment(waiting)
        self.inbox.clear()

    async def _close(self) -> bool:
        """Save the state for the card's next run; False when a move or comment arrived
        meanwhile (the run goes on instead of closing over it)."""
        if self._lane_used:  # only runs with the board lane (versions.BOARD_LANE) ever use it
            await self._lane_idle()
            if self.comments or self.pending:  # arrived while the board's writes finished
                return False
        if versions.patched(versions.STATE_IN_STORE):
            save = SaveStateInput(card_key=self.card_key, state=self.state)
            summary = "keep the card's state for its next run"
            if versions.patched(versions.STATE_SAVED_LOCALLY):
                # In the task that closes the run: the run ends one workflow task sooner. A move
                # arriving meanwhile still wins: Temporal refuses to complete a run over a new event.
                await workflow.execute_local_activity(names.SAVE_STATE, save, **policies.STORE_LOCAL, summary=summary)
            else:
                await workflow.execute_activity(names.SAVE_STATE, save, **policies.STORE, summary=summary)
        return not self.comments and not self.pending

    async def _run_stage(self, start: CardStart, target: Transition) -> None:
        stage = target.to
        # The worker's config.toml decides; the answer is recorded, so replays see the same one.
        settings = await workflow.execute_local_activity(
            names.STAGE_SETTINGS, stage, result_type=StageSettings, **policies.LOCAL,
            summary=f"settings of stage {stage}")
        self.state.stage_runs += 1
        self.state.auto_retry = None  # whatever runs now replaces a planned retry
        run = self.state.stage_runs
        self.state.iteration = 0
        was_blocked = self.state.status == "blocked"
        self._set_stage(start, stage, "running")
        self._details()
        on_board = board_comments = dry_run = False
        opening: asyncio.Future[tuple[bool, str, bool]] | None = None
        lane = versions.patched(versions.BOARD_LANE)
        if lane:
            self._on_lane(lambda: self._open_on_board(stage, run, was_blocked))
        elif versions.patched(versions.BOARD_ALONGSIDE):
            # The board hears of the run while its stage starts: nothing awaited before the child.
            opening = asyncio.ensure_future(board.opening(self.card_key, stage, run, was_blocked))
        elif versions.patched(versions.BOARD_WRITES):  # runs recorded with the first board writes: comment, then stage
            first = await board.started(self.card_key, stage, run)
            on_board, board_comments = not first.skipped or bool(first.would), not first.skipped
            self.state.board = first.line()
            self._details()
        handle = await workflow.start_child_workflow(
            StageWorkflow.run,
            StageInput(ref=start.ref, stage=stage, run=run, settings=settings, board_comments=board_comments),
            id=f"{workflow.info().workflow_id}/{run}-{stage}",
            static_summary=f"{stage} run {run} of card {start.ref.key}",
            execution_timeout=timedelta(days=7),
            search_attributes=search_attributes(start, stage) if versions.patched(versions.STATUS_ATTRIBUTES) else None,
        )
        if opening is not None:
            on_board, self.state.board, dry_run = await opening
            self._details()
        while not handle.done():
            await workflow.wait_condition(lambda: handle.done() or bool(self.pending or self.comments)
                                          or self.stop is not None)
            await self._flush_comments()
            if self.pending and transitions.pick_move(self.pending).to == stage and not handle.done() \
                    and self.stop is None and versions.patched(versions.SAME_STAGE_KEEPS_RUNNING):
                self.pending.clear()  # the card is already there (a board echo, a second click): go on
                continue
            if (self.pending or self.stop is not None) and not handle.done():
                handle.cancel()  # the stage returns "cancelled"; its messages are in the store
                break
        try:
            result: StageRun = await handle
        except ChildWorkflowError as err:
            cancelled = isinstance(err.cause, CancelledError)
            failed = _failed_run(err)
            result = failed or StageRun(stage=stage, run=run, outcome="cancelled" if cancelled else "failed",
                              reason="the card moved to another stage" if cancelled else str(err.cause or err)[:500])
        except asyncio.CancelledError:
            if not self.pending or _card_cancelled():
                raise
            result = StageRun(stage=stage, run=run, outcome="cancelled", reason="the card moved to another stage")
        if _card_cancelled():
            # The card was cancelled while we awaited its stage: the SDK passed the cancel on to
            # the stage, which returned normally ("cancelled"), so nothing raised here. A cancel
            # of the card is not a move: end the card instead of running the next stage.
            raise asyncio.CancelledError("the card workflow was cancelled")
        if self.stop is not None:
            if result.outcome == "cancelled" and not self.pending:
                # A recorded history's request has no reason: it replays the same words.
                result = result.model_copy(update={"reason": self.stop.reason or (
                    f"cancelled by {self.stop.actor or 'someone'} (card cancel); its work is kept")})
            self.stop = None
        self._record(start, result, settings)
        if lane:
            # What the end writes say is decided now (the state as this run left it, the move
            # auto-advance queued); the lane writes it once the run's opening is on the board.
            auto = next((t for t in self.pending if t.delivery_id == f"auto/{result.run}"), None)
            state = self.state.model_copy(deep=True)
            self._on_lane(lambda: self._end_on_board(start, result, state, auto.to if auto else ""))
            return
        if on_board and result.outcome != "cancelled":
            await self._board_ended(start, result, dry_run=dry_run)
        self.state.board_told = run

    # --- the board lane ------------------------------------------------------------------

    def _on_lane(self, write: Callable[[], Awaitable[None]]) -> None:
        self._lane_used = True
        self._lane.append(write)
        if not self._lane_busy:
            self._lane_busy = True
            self._lane_task = asyncio.ensure_future(self._drain_lane())

    async def _drain_lane(self) -> None:
        try:
            while self._lane:
                await self._lane.pop(0)()
        finally:
            self._lane_busy = False

    async def _lane_idle(self) -> None:
        """Before the run closes or continues as new: nothing written to the board is dropped."""
        if self._lane_busy:
            await workflow.wait_condition(lambda: not self._lane_busy)

    async def _open_on_board(self, stage: str, run: int, was_blocked: bool) -> None:
        on_board, self.state.board, dry_run = await board.opening(self.card_key, stage, run, was_blocked)
        self._opened[run] = (on_board, dry_run)
        self._details()

    async def _end_on_board(self, start: CardStart, result: StageRun, state: CardState, next_stage: str) -> None:
        on_board, dry_run = self._opened.pop(result.run, (False, False))
        if on_board and result.outcome != "cancelled":
            local = dry_run and versions.patched(versions.BOARD_DRY_RUN_LOCAL)
            writes = await board.ended(self.card_key, state, result, next_stage, local=local)
            said = writes[0]
            if start.ref.board == "github" and said.target:
                history = self.state.history
                for i, recorded in enumerate(history):
                    if recorded.run == result.run:
                        history[i] = recorded.model_copy(update={"comment": said.target})
            self.state.board = "; ".join(w.line() for w in writes)
            self._details()
        self.state.board_told = max(self.state.board_told, result.run)

    async def _board_ended(self, start: CardStart, result: StageRun, *, dry_run: bool = False) -> None:
        """The run's outcome on the board, then the card to its next column (or blocked)."""
        auto = next((t for t in self.pending if t.delivery_id == f"auto/{result.run}"), None)
        local = dry_run and versions.patched(versions.BOARD_DRY_RUN_LOCAL)
        writes = await board.ended(self.card_key, self.state, result, auto.to if auto else "", local=local)
        said, last = writes[0], self.state.history[-1] if self.state.history else None
        if start.ref.board == "github" and said.target and last is not None and last.run == result.run:
            self.state.history[-1] = last.model_copy(update={"comment": said.target})
        self.state.board = "; ".join(w.line() for w in writes)
        self._details()

    def _record(self, start: CardStart, result: StageRun, settings: StageSettings) -> None:
        self.state, auto = transitions.record_run(self.state, result, settings, moves_queued=bool(self.pending),
                                                  keep_runs=policies.MAX_STAGE_RUNS_KEPT)
        if self.state.status == "blocked":
            self._set_stage(start, result.stage, "blocked")
        else:
            self._publish([])
        if auto is not None:
            self.pending.append(auto)
        elif not self.pending:
            self.state.auto_retry = transitions.plan_auto_retry(self.state, result, settings, workflow.now())
        self._details()

    async def _flush_comments(self) -> None:
        while self.comments:
            c = self.comments[0]
            await workflow.execute_activity(
                names.APPEND,
                AppendInput(card_key=self.card_key, role="user", text=c.text, author=c.author,
                            dedup_key=f"comment/{c.delivery_id}", stage=self.state.stage),
                result_type=int,
                **policies.STORE,
                summary=f"comment from {c.author or 'someone'} joins the history",
            )
            self.comments.pop(0)

    def _set_stage(self, start: CardStart, stage: str, status: str) -> None:
        self.state.stage = stage
        self.state.status = status  # type: ignore[assignment]
        shown = "blocked" if status == "blocked" else stage
        self._publish([CARD_STAGE.value_set(shown)] if self._attribute(CARD_STAGE) != shown else [])

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

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > self.max_events

    async def _continue_as_new(self, start: CardStart) -> None:
        # `card cancel` answers once its run is recorded, which may be just before this: let it
        # answer (no command; when no handler runs this resolves in the same workflow task).
        await self._lane_idle()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(start.model_copy(update={"state": self.state, "pending": self.pending,
                                                          "title": self.title, "url": self.url}))


def _failed_run(err: ChildWorkflowError) -> StageRun | None:
    """The run a StageWorkflow recorded before it failed itself (names.STAGE_FAILED), else None."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == names.STAGE_FAILED and cause.details:
        return StageRun.model_validate(cause.details[0])
    return None
