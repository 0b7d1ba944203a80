"""The card's progress on its board, from the card workflow: a short comment when a stage run
starts; when it ends, one with its result (the plan, the review, the test outcome, the fix, the
pull request), the question when blocked, the root cause and how to retry when failed; the
card moved to the column of the stage auto-advance starts; a blocked card to the blocked
column or label. Each write is one activity (board.comment, board.move) whose key is its
marker, `<card>/<run>/<kind>`, so every attempt of one write is the same write.

A board write never changes a stage's outcome: a skipped board (no credential), a permanent
refusal and retries that ran out all end as a line in the card's state and details.
"""

from __future__ import annotations

from collections.abc import Awaitable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as TemporalTimeout

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import BoardCommentInput, BoardMoveInput, BoardWrite, CardState, StageRun
    from cardloop.workflows import policies
    from cardloop.workflows.local_gate import LocalGate


def is_dry_run(write: BoardWrite) -> bool:
    """Nothing was sent, and the write says what it would have done."""
    return bool(write.skipped) and bool(write.would)


async def _write(activity: str, inp: BoardCommentInput | BoardMoveInput, summary: str, *, local: bool,
                 gate: LocalGate | None) -> BoardWrite:
    """One write (`activity` is names.BOARD_COMMENT or names.BOARD_MOVE); with a `gate` (the
    card's board lane), never beside the loop's local activity."""
    def call() -> Awaitable[BoardWrite]:
        if local:
            return _settled_local(workflow.execute_local_activity(
                activity, inp, result_type=BoardWrite, **policies.LOCAL, summary=summary))
        return _settled(workflow.execute_activity(activity, inp, result_type=BoardWrite,
                                                  **policies.BOARD, summary=summary))
    if gate is None:
        return await call()
    if local:
        return await gate.local("lane", call)
    await gate.turn("lane")
    return await call()


async def _comment(inp: BoardCommentInput, summary: str, *, local: bool = False,
                   gate: LocalGate | None = None) -> BoardWrite:
    return await _write(names.BOARD_COMMENT, inp, summary, local=local, gate=gate)


async def _move(inp: BoardMoveInput, summary: str, *, local: bool = False, gate: LocalGate | None = None) -> BoardWrite:
    return await _write(names.BOARD_MOVE, inp, summary, local=local, gate=gate)


async def _settled_local(write: Awaitable[BoardWrite]) -> BoardWrite:
    """The same activity run locally, so a board that became writable since the run started is
    still written once (its key). A local activity's failure reaches the workflow bare (and a
    timeout, on replay, as TimeoutError): a result like the remote one's, never the stage's."""
    try:
        return await _settled(write)
    except (ApplicationError, TemporalTimeout) as err:
        return BoardWrite(failed=f"gave up after retries: {getattr(err, 'message', None) or err}"[:1_000])


async def _settled(write: Awaitable[BoardWrite]) -> BoardWrite:
    """The write's result; its retries running out is a result too, never the stage's failure."""
    try:
        return await write
    except ActivityError as err:
        if isinstance(err.cause, CancelledError):
            raise
        cause: BaseException = err
        while getattr(cause, "cause", None) is not None:
            cause = cause.cause  # type: ignore[attr-defined]
        return BoardWrite(failed=f"gave up after retries: {getattr(cause, 'message', None) or cause}"[:1_000])


async def started(card_key: str, stage: str, run: int, gate: LocalGate | None = None) -> BoardWrite:
    return await _comment(BoardCommentInput(card_key=card_key, key=f"{card_key}/{run}/started", kind="started",
                                            stage=stage, run=run), f"board: {stage} run {run} started", gate=gate)


async def opening(card_key: str, stage: str, run: int, was_blocked: bool,
                  gate: LocalGate | None = None) -> tuple[bool, str, bool]:
    """The started comment and, for a blocked card running again, its unblocking: (whether the
    run's end is written too (written, or a dry run), the line for the card's details, whether
    the started comment was a dry run)."""
    first = await started(card_key, stage, run, gate)
    on_board, line = not first.skipped or bool(first.would), first.line()
    if on_board and was_blocked:
        line += "; " + (await resumed(card_key, stage, run, gate)).line()
    return on_board, line, is_dry_run(first)


async def resumed(card_key: str, stage: str, run: int, gate: LocalGate | None = None) -> BoardWrite:
    """A blocked card runs again: out of the blocked column (into `stage`'s) or its label removed."""
    return await _move(BoardMoveInput(card_key=card_key, key=f"{card_key}/{run}/unblock", stage=stage, unblock=True),
                       f"board: {stage} runs again, no longer blocked", gate=gate)


def retry_words(card_key: str, state: CardState, stage: str) -> str:
    plan = state.auto_retry
    manual = f"`cardloop card retry {card_key}`, or move the card to the {stage} column again"
    if plan is not None:
        return (f"cardloop runs {stage} again by itself at {plan.due:%H:%M} UTC (retry {plan.attempt} of {plan.of}); "
                f"sooner: {manual}.")
    return f"{manual}."


async def ended(card_key: str, state: CardState, result: StageRun, next_stage: str, *,
                local: bool = False, gate: LocalGate | None = None) -> list[BoardWrite]:
    """The outcome comment, then the move (auto-advance) or the blocked column/label; `local`:
    as local activities (the run's start was a dry run); `gate`: the card's (local_gate.py)."""
    run = result.run
    said = await _comment(BoardCommentInput(
        card_key=card_key, key=f"{card_key}/{run}/{result.stage}", kind="outcome", stage=result.stage, run=run,
        outcome=result.outcome, reason=result.reason[:8_000], pull_request=result.pull_request,
        next_stage=next_stage, retry=retry_words(card_key, state, result.stage) if result.outcome == "failed" else ""),
        f"board: {result.stage} run {run} {result.outcome}", local=local, gate=gate)
    writes = [said]
    if state.status == "blocked":
        writes.append(await _move(BoardMoveInput(card_key=card_key, key=f"{card_key}/{run}/blocked", blocked=True),
                                  "board: blocked", local=local, gate=gate))
    elif next_stage:
        writes.append(await _move(BoardMoveInput(card_key=card_key, key=f"{card_key}/{run}/move", stage=next_stage),
                                  f"board: to {next_stage}", local=local, gate=gate))
    return writes
