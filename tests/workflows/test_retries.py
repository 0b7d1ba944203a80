"""A model that is overloaded or unreachable for a while: the stage survives it on the schedule
[retry] configures, says what it is doing meanwhile, and a stage that failed anyway runs again
on `card retry` or by itself (auto_retry_after). Short durations are configured for the tests."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from cardloop.contracts.errors import InputError, RejectedError
from cardloop.contracts.payloads import CardRef, CardState
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)
FAST_OVERLOAD = {"CARDLOOP_RETRY__OVERLOAD_INITIAL": "0.1s", "CARDLOOP_RETRY__OVERLOAD_MAX_INTERVAL": "0.3s",
                 "CARDLOOP_RETRY__OVERLOAD_DEADLINE": "2m"}
# The first 529 ends the call: a stage fails as transient at once, deterministically.
NO_PATIENCE = {"CARDLOOP_RETRY__OVERLOAD_DEADLINE": "0"}


@pytest.mark.stack_env(**FAST_OVERLOAD)
async def test_an_overload_longer_than_the_old_eight_attempts_is_survived(stack: Stack) -> None:
    stack.model.inject(status=529, times=12)  # the old policy failed the stage after 8 attempts
    ref = stack.cards.import_card(small_card("OVER-1"))
    await stack.cards.move(ref, "testing", delivery_id="t")
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=120)
    assert state.history[0].outcome == "completed"
    assert stack.model.request_count == 13
    assert len([m for m in stack.store.messages(ref.key) if m.role == "assistant"]) == 1
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


@pytest.mark.stack_env(CARDLOOP_RETRY__UNREACHABLE_INITIAL="1s", CARDLOOP_RETRY__UNREACHABLE_MAX_INTERVAL="2s")
async def test_an_unreachable_model_is_retried_on_the_short_schedule_and_the_card_says_so(stack: Stack) -> None:
    stack.model.stop()  # connection refused until it starts again on the same port
    ref = stack.cards.import_card(small_card("DOWN-1"))
    await stack.cards.move(ref, "testing", delivery_id="t")
    said: str | None = None
    for _ in range(400):
        state = await stack.cards.state(ref)
        said = await stack.cards.retrying(ref, state) if state is not None else None
        if said and "attempt 2 of 8" in said:
            break
        await asyncio.sleep(0.05)
    assert said is not None
    # The live wait, not the one the failure said when it was raised (which goes stale).
    assert said.startswith("retrying: cannot reach the model (attempt 2 of 8): anthropic: ")
    assert "[attempt 3 " in said and "next in" not in said
    stack.model.start()
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=60)
    assert state.history[0].outcome == "completed"
    assert await stack.cards.retrying(ref, state) is None


@pytest.mark.stack_env(**NO_PATIENCE)
async def test_card_retry_runs_the_failed_stage_again_on_the_same_workflow(stack: Stack) -> None:
    with pytest.raises(InputError, match="'acme/github/NEVER' is not known to the store"):
        await stack.cards.retry(CardRef(tenant="acme", board="github", card_id="NEVER"))
    stack.model.inject(status=529)
    ref = stack.cards.import_card(small_card("RETRY-1"))
    await stack.cards.move(ref, "testing", delivery_id="t")
    state = await stack.wait_state(ref, lambda s: bool(s.history))
    failed = state.history[0]
    assert (failed.outcome, failed.transient) == ("failed", True)
    assert failed.reason.startswith("gave up: the model is overloaded for ")
    assert "anthropic: HTTP 529" in failed.reason and state.auto_retry is None  # not configured here
    assert await stack.cards.retry(ref, actor="priya") == "testing"
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [(r.stage, r.outcome) for r in state.history] == [("testing", "failed"), ("testing", "completed")]
    with pytest.raises(RejectedError, match=r"nothing to retry: it has no running workflow .*completed"):
        await stack.cards.retry(ref)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "card-retry")


@pytest.mark.stack_env(**NO_PATIENCE, CARDLOOP_RETRY__AUTO_RETRY_AFTER="0.5s", CARDLOOP_RETRY__AUTO_RETRIES="2")
async def test_a_transiently_failed_stage_runs_again_by_itself_a_bounded_number_of_times(stack: Stack) -> None:
    stack.model.inject(status=529, times=3)  # the first run and both automatic retries meet a 529
    ref = stack.cards.import_card(small_card("AUTO-1"))
    await stack.cards.move(ref, "testing", delivery_id="t")

    def gave_up(s: CardState) -> bool:
        return len(s.history) == 3 and s.auto_retry is None and s.status == "idle"

    state = await stack.wait_state(ref, gave_up, timeout=90)
    assert [r.outcome for r in state.history] == ["failed", "failed", "failed"]
    assert all(r.transient for r in state.history)
    with pytest.raises(RejectedError, match=r"nothing to retry: .*(running|a move)"):
        await asyncio.gather(stack.cards.retry(ref), stack.cards.retry(ref))  # the second finds the first queued
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [r.outcome for r in state.history] == ["failed", "failed", "failed", "completed"]
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "auto-retry-bounded")


@pytest.mark.stack_env(**NO_PATIENCE, CARDLOOP_RETRY__AUTO_RETRY_AFTER="1h")
async def test_a_planned_automatic_retry_waits_on_a_timer_and_a_manual_retry_takes_over(stack: Stack) -> None:
    stack.model.inject(status=529)
    ref = stack.cards.import_card(small_card("AUTO-2"))
    await stack.cards.move(ref, "testing", delivery_id="t")
    state = await stack.wait_state(ref, lambda s: s.auto_retry is not None)
    plan = state.auto_retry
    assert plan is not None and (plan.stage, plan.attempt, plan.of) == ("testing", 1, 3)
    meta = await stack.client.get_workflow_handle(ref.workflow_id).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert "Failed for a transient cause: retrying testing automatically at" in meta.current_details
    assert await stack.cards.retry(ref) == "testing"
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [r.outcome for r in state.history] == ["failed", "completed"] and state.auto_retry is None


@pytest.mark.stack_env(CARDLOOP_RETRY__OVERLOAD_INITIAL="0.2s", CARDLOOP_RETRY__OVERLOAD_MAX_INTERVAL="0.4s",
                       CARDLOOP_RETRY__OVERLOAD_DEADLINE="3s")
async def test_an_overload_past_the_configured_deadline_fails_the_stage_as_transient(stack: Stack) -> None:
    stack.model.inject(status=529, times=100)
    ref = stack.cards.import_card(small_card("OVER-2"))
    await stack.cards.move(ref, "testing", delivery_id="t")
    state = await stack.wait_state(ref, lambda s: bool(s.history), timeout=90)
    failed = state.history[0]
    assert (failed.outcome, failed.transient) == ("failed", True)
    assert failed.reason.startswith("gave up: the model is overloaded for ")
    assert "[retry] overload_deadline is 3 s" in failed.reason
    assert 3 < stack.model.request_count < 100  # retried on the schedule, then stopped at the deadline
