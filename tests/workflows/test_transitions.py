"""The card's transition rules, without Temporal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cardloop.contracts.payloads import CardState, StageRun, StageSettings, Transition
from cardloop.workflows.transitions import (
    after_comments,
    auto_retry_transition,
    failed_run,
    pick_move,
    plan_auto_retry,
    record_run,
    retry_transition,
)

SETTINGS = StageSettings(profile="p", max_iterations=3, token_budget=1000, auto_advance=True, next_stage="coding")


def run(outcome: str = "completed", **fields: object) -> StageRun:
    return StageRun.model_validate({"stage": "planning", "run": 1, "outcome": outcome, "reason": "why",
                                    "iterations": 2, "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5,
                                    **fields})


def test_only_the_newest_of_several_queued_moves_runs() -> None:
    moves = [Transition(to="coding", delivery_id="a"), Transition(to="review", delivery_id="b")]
    assert pick_move(moves).to == "review"


def test_a_completed_stage_advances_unless_the_board_moved_the_card_meanwhile() -> None:
    state, auto = record_run(CardState(status="running", stage="planning"), run(), SETTINGS,
                             moves_queued=False, keep_runs=20)
    assert auto == Transition(to="coding", delivery_id="auto/1", actor="cardloop", reason="planning completed")
    assert state.status == "idle" and state.cost_usd == 0.5 and state.input_tokens == 10
    assert state.last_result == "planning: completed (why)" and state.current is None
    _, auto = record_run(CardState(), run(), SETTINGS, moves_queued=True, keep_runs=20)
    assert auto is None
    _, auto = record_run(CardState(), run(), SETTINGS.model_copy(update={"auto_advance": False}),
                         moves_queued=False, keep_runs=20)
    assert auto is None


def test_a_blocked_stage_waits_with_its_reason_and_a_comment_resumes_it() -> None:
    before = CardState(status="running", stage="planning", stage_runs=3)
    state, auto = record_run(before, run("blocked", reason="which database?"), SETTINGS,
                             moves_queued=False, keep_runs=20)
    assert auto is None and state.status == "blocked" and state.blocked_reason == "which database?"
    assert before.status == "running" and before.history == []  # the old value is left alone
    assert after_comments(state) == Transition(to="planning", delivery_id="resume/3",
                                               reason="a comment on a blocked card")


def test_failed_cancelled_and_exhausted_runs_leave_the_card_idle() -> None:
    for outcome in ("failed", "cancelled", "budget_exhausted"):
        state, auto = record_run(CardState(), run(outcome), SETTINGS, moves_queued=False, keep_runs=20)
        assert (state.status, auto) == ("idle", None)
        assert after_comments(state) == "wait"
    assert after_comments(CardState(status="done", stage="done")) == "finish"


def test_the_kept_stage_runs_are_bounded_oldest_first() -> None:
    state = CardState()
    for i in range(1, 6):
        state, _ = record_run(state, run(run=i), SETTINGS, moves_queued=False, keep_runs=3)
    assert [r.run for r in state.history] == [3, 4, 5]
    assert state.cost_usd == 2.5  # totals count every run, also those no longer listed


NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
RETRYING = SETTINGS.model_copy(update={"auto_retry_after": 600.0, "auto_retries": 2})


def _failed(state: CardState, n: int, transient: bool = True) -> tuple[CardState, StageRun]:
    result = run("failed", run=n, transient=transient, reason="gave up: the model is overloaded")
    state, _ = record_run(state.model_copy(update={"status": "running", "stage": "planning"}), result, RETRYING,
                          moves_queued=False, keep_runs=20)
    return state, result


def test_only_a_card_whose_last_run_failed_can_be_retried_and_a_repeat_runs_once() -> None:
    state, result = _failed(CardState(), 4)
    assert failed_run(state, moves_queued=False) == result
    assert failed_run(state, moves_queued=True) is None  # a move is already queued: it wins
    move = retry_transition(result, actor="priya")
    assert move.to == "planning" and move.delivery_id == "retry/4" and move.actor == "priya"
    done, _ = record_run(state.model_copy(update={"status": "running"}), run(run=5), SETTINGS,
                         moves_queued=False, keep_runs=20)
    assert failed_run(done, moves_queued=False) is None
    assert failed_run(CardState(), moves_queued=False) is None
    blocked, _ = record_run(CardState(), run("blocked"), SETTINGS, moves_queued=False, keep_runs=20)
    assert failed_run(blocked, moves_queued=False) is None


def test_a_transient_failure_is_retried_automatically_a_bounded_number_of_times_in_a_row() -> None:
    state, result = _failed(CardState(), 1)
    plan = plan_auto_retry(state, result, RETRYING, NOW)
    assert plan is not None and plan.due == NOW + timedelta(minutes=10) and (plan.attempt, plan.of) == (1, 2)
    assert auto_retry_transition(plan).delivery_id == "auto-retry/1"
    state, result = _failed(state, 2)
    assert plan_auto_retry(state, result, RETRYING, NOW).attempt == 2  # type: ignore[union-attr]
    state, result = _failed(state, 3)
    assert plan_auto_retry(state, result, RETRYING, NOW) is None  # two retries in a row were enough


def test_no_automatic_retry_for_a_deterministic_failure_or_when_not_configured() -> None:
    state, result = _failed(CardState(), 1, transient=False)
    assert plan_auto_retry(state, result, RETRYING, NOW) is None
    state, result = _failed(CardState(), 1)
    assert plan_auto_retry(state, result, SETTINGS, NOW) is None
