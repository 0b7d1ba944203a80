"""CardWorkflow: one per card, the card's state machine over stages.

Transitions and comments arrive as signals (signal-with-start creates the workflow on the
first one). A transition to another stage while one runs cancels the running StageWorkflow
(its work is already in the store) and starts the new one; one to the running stage leaves it
running; a repeated delivery id is
applied once, also across continue-as-new. Search attributes (CardId, CardStage, Repo,
Tenant, CardStatus, StageOutcome; stage runs get the first four and their outcome), the memo
and the current details keep the Temporal UI the operator's view.

The state machine is here; its parts are beside it: signals, updates and the query in
card_inbox.py, the board lane in card_lane.py, the state and the operator's view in card_view.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        AppendInput,
        CardStart,
        CardState,
        SavedState,
        SaveStateInput,
        StageInput,
        StageRun,
        StageSettings,
        Transition,
    )
    from cardloop.workflows import board, policies, transitions, versions
    from cardloop.workflows.card_inbox import CardInbox
    from cardloop.workflows.card_view import search_attributes
    from cardloop.workflows.stage import StageWorkflow

T = TypeVar("T")


def _card_cancelled() -> bool:
    """True once someone asked Temporal to cancel this card workflow (its main task)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@workflow.defn(name=names.CARD_WORKFLOW)
class CardWorkflow(CardInbox):
    @workflow.run
    async def run(self, start: CardStart) -> CardState:
        versions.decide_at_start()
        self.card_key = start.ref.key
        self.title, self.url = start.title, start.url
        self.max_events = start.max_history_events
        await self._load_state(start)
        if self.state.stage_runs and start.state is None:
            # A card reopened by a move or comment: its status, and its stage, not "new".
            self._publish(self._stage_shown() if versions.decided(versions.REOPENED_SHOWS_ITS_STAGE) else [])
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

    async def _local(self, call: Callable[[], Awaitable[T]]) -> T:
        """The loop's local activity: alone, on runs with versions.LOCAL_ACTIVITIES_ALONE."""
        if versions.decided(versions.LOCAL_ACTIVITIES_ALONE):
            return await self._gate.local("loop", call)
        return await call()

    async def _load_state(self, start: CardStart) -> None:
        """The state carried by continue-as-new, or the one the card's last run closed with
        (the store holds it: the next run starts only after the last one closed)."""
        if start.state is not None:
            self.state = start.state
        elif workflow.info().continued_run_id is None and versions.patched(versions.STATE_IN_STORE):
            saved = await self._local(lambda: workflow.execute_local_activity(
                names.LOAD_STATE, start.ref.key, result_type=SavedState, **policies.LOCAL,
                summary="the card's state when its last run closed"))
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
            locally = versions.patched(versions.STATE_SAVED_LOCALLY)
            if locally and not versions.decided(versions.STATE_SAVED_BY_ACTIVITY):
                # Runs recorded so: in the task that closes the run (one workflow task sooner). A
                # move arriving meanwhile won, except when a query cut the task (versions.py).
                await workflow.execute_local_activity(names.SAVE_STATE, save, **policies.STORE_LOCAL, summary=summary)
            else:
                await workflow.execute_activity(names.SAVE_STATE, save, **policies.STORE, summary=summary)
        return not self.comments and not self.pending

    async def _run_stage(self, start: CardStart, target: Transition) -> None:
        stage = target.to
        # The worker's config.toml decides; the answer is recorded, so replays see the same one.
        settings = await self._local(lambda: workflow.execute_local_activity(
            names.STAGE_SETTINGS, stage, result_type=StageSettings, **policies.LOCAL,
            summary=f"settings of stage {stage}"))
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
        # A stop that reached the run as it ended on its own still stops the card: what the user
        # (or the board, archiving the card) asked for is that nothing runs on by itself.
        held = self.stop is not None and versions.decided(versions.STOP_HOLDS_THE_CARD)
        if self.stop is not None:
            if result.outcome == "cancelled" and not self.pending:
                # A recorded history's request has no reason: it replays the same words.
                result = result.model_copy(update={"reason": self.stop.reason or (
                    f"cancelled by {self.stop.actor or 'someone'} (card cancel); its work is kept")})
            self.stop = None
        self._record(start, result, settings, held=held)
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

    def _record(self, start: CardStart, result: StageRun, settings: StageSettings, *, held: bool = False) -> None:
        """`held`: the run was asked to stop; whatever its outcome, nothing follows by itself."""
        self.state, auto = transitions.record_run(self.state, result, settings,
                                                  moves_queued=bool(self.pending) or held,
                                                  keep_runs=policies.MAX_STAGE_RUNS_KEPT)
        if self.state.status == "blocked":
            self._set_stage(start, result.stage, "blocked")
        else:
            self._publish([])
        if auto is not None:
            self.pending.append(auto)
        elif not self.pending and not held:
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
