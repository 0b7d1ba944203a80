"""The card's transition rules as plain functions over plain values.

CardWorkflow asks these what to do and does it (child workflows, search attributes,
details); they touch nothing of Temporal, so they are tested without a server
(tests/workflows/test_transitions.py) and a change to a rule cannot hide in orchestration code.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

from cardloop.contracts.payloads import AutoRetry, CardState, StageRun, StageSettings, Transition

# What a card with no queued move does after its comments joined the history.
Idle = Literal["wait", "finish"]


def pick_move(pending: Sequence[Transition]) -> Transition:
    """Of several queued moves only the newest matters: the board's column is where it ended."""
    return pending[-1]


def after_comments(state: CardState) -> Transition | Idle:
    """A comment with no move: a blocked card runs its stage again (the answer is in its
    history now), a finished card has nothing to run, any other card waits."""
    if state.status == "blocked" and state.stage:
        return Transition(to=state.stage, delivery_id=f"resume/{state.stage_runs}",
                          reason="a comment on a blocked card")
    return "finish" if state.status == "done" else "wait"


def record_run(state: CardState, result: StageRun, settings: StageSettings, *, moves_queued: bool,
               keep_runs: int) -> tuple[CardState, Transition | None]:
    """The card's state after a stage run, and the move auto-advance makes (None: wait).

    A queued move from the board wins over auto-advance; a blocked run leaves the card
    blocked with the agent's reason until someone answers or moves it.
    """
    history = [*state.history, result][-keep_runs:]
    new = state.model_copy(deep=True, update={
        "current": None, "iteration": result.iterations, "history": history,
        "input_tokens": state.input_tokens + result.input_tokens,
        "output_tokens": state.output_tokens + result.output_tokens,
        "cost_usd": state.cost_usd + result.cost_usd,
        "last_result": f"{result.stage}: {result.outcome} ({result.reason})",
        "status": "idle",
    })
    if result.outcome == "blocked":
        new.blocked_reason = result.reason
        new.stage = result.stage
        new.status = "blocked"
        return new, None
    if result.outcome == "completed" and settings.auto_advance and settings.next_stage and not moves_queued:
        return new, Transition(to=settings.next_stage, delivery_id=f"auto/{result.run}", actor="cardloop",
                               reason=f"{result.stage} completed")
    return new, None


def failed_run(state: CardState, *, moves_queued: bool) -> StageRun | None:
    """The card's last stage run when the card stands failed on it (nothing ran or is queued
    since), else None: only then is there something for `card retry` to run again."""
    if state.status != "idle" or moves_queued or not state.history:
        return None
    last = state.history[-1]
    return last if last.outcome == "failed" and last.stage == state.stage else None


def retry_transition(run: StageRun, *, actor: str | None) -> Transition:
    """`card retry`: the failed stage again. The delivery id names the failed run, so a
    repeated request (a retried HTTP call, a double click) runs it once."""
    return Transition(to=run.stage, delivery_id=f"retry/{run.run}", actor=actor,  # type: ignore[arg-type]
                      reason=f"retry of failed {run.stage} run {run.run}")


def plan_auto_retry(state: CardState, result: StageRun, settings: StageSettings, now: datetime) -> AutoRetry | None:
    """After a transient failure (the model stayed overloaded or unreachable past its retry
    schedule) the card runs the stage again after settings.auto_retry_after, at most
    settings.auto_retries times in a row; `state` already holds `result` in its history."""
    if result.outcome != "failed" or not result.transient or settings.auto_retry_after <= 0:
        return None
    streak = 0
    for run in reversed(state.history):
        if run.stage != result.stage or run.outcome != "failed" or not run.transient:
            break
        streak += 1
    if streak > settings.auto_retries:
        return None
    return AutoRetry(stage=result.stage, run=result.run, due=now + timedelta(seconds=settings.auto_retry_after),
                     attempt=streak, of=settings.auto_retries)


def auto_retry_transition(plan: AutoRetry) -> Transition:
    return Transition(to=plan.stage, delivery_id=f"auto-retry/{plan.run}", actor="cardloop",  # type: ignore[arg-type]
                      reason=f"automatic retry {plan.attempt} of {plan.of} after a transient failure")


def card_status(state: CardState) -> str:
    """The card's status as operators filter on it (search attribute CardStatus); one definition,
    shared with `card list --status`."""
    return state.filter_status
