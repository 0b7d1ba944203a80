"""The card's transition rules as plain functions over plain values.

CardWorkflow asks these what to do and does it (child workflows, search attributes,
details); they touch nothing of Temporal, so they are tested without a server
(tests/workflows/test_transitions.py) and a change to a rule cannot hide in orchestration code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from cardloop.contracts.payloads import CardState, StageRun, StageSettings, Transition

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
