"""What reaches a card workflow from outside: moves, comments and renames (signals), the
stage run's progress, `card retry` and `card cancel` (updates, refused with the reason when
there is nothing to do) and the state query. A repeated delivery id is applied once."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        CancelRequest,
        CardComment,
        CardState,
        Retitle,
        RetryRequest,
        StageProgress,
        StageRun,
        Transition,
        delivery_key,
    )
    from cardloop.workflows import policies, transitions, versions
    from cardloop.workflows.card_lane import CardBoardLane


class CardInbox(CardBoardLane):
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
        memo = {"title": t.title, "url": t.url or ""}
        if versions.decided(versions.LOCAL_ACTIVITIES_ALONE) and self._gate.busy_for("signal"):
            # A local activity is in flight: the memo follows the code after it (local_gate.py).
            if self._memo_due is None:
                self._memo_task = asyncio.ensure_future(self._memo_when_alone())
            self._memo_due = memo
        else:
            workflow.upsert_memo(memo)
        if self.loaded:
            self._details()

    async def _memo_when_alone(self) -> None:
        await self._gate.turn("signal")
        if self._memo_due is not None:
            workflow.upsert_memo(self._memo_due)
            self._memo_due = None

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

    def _refuse_while_busy(self) -> None:
        # A refused update leaves no trace in the history: the caller gets the reason (and
        # CardService asks again when it says "try again in a moment").
        if not self.loaded:
            raise ValueError(f"the card's workflow is starting; {names.TRY_AGAIN}")
        if self._gate.holder is not None:
            # An update accepted while a local activity ends under a query would answer before the
            # code after the activity in the live run and after it on replay (local_gate.py).
            raise ValueError(f"the card is between two steps; {names.TRY_AGAIN}")

    @retry.validator
    def _retry_allowed(self, req: RetryRequest) -> None:
        self._refuse_while_busy()
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
        self._refuse_while_busy()
        if self.state.status != "running":
            raise ValueError(f"nothing to cancel: {self._not_running()}")

    @workflow.query(name=names.QUERY_STATE)
    def get_state(self) -> CardState:
        return self.state

    def _seen(self, delivery_id: str) -> bool:
        delivery_id = delivery_key(delivery_id)
        seen = self.state.seen_deliveries
        if delivery_id in seen:
            return True
        seen.append(delivery_id)
        del seen[: max(0, len(seen) - policies.MAX_SEEN_DELIVERIES)]
        return False
