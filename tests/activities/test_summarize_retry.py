"""A summarize that fails part way (the provider errs after some chunks were summarized) and is
retried, on the real stack (Temporal dev server, a worker, SQLite, the scripted model on
loopback): the retry pays only for the chunks not summarized yet, and the run's cost is what
the ledger bills."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from cardloop.prompts.card import Message
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(120)


def long_history() -> list[dict]:
    return [Message(role="user" if i % 2 == 0 else "assistant",
                    content=f"Message {i}: " + "details about retries and backoff " * 60).model_dump()
            for i in range(120)]


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false", CARDLOOP_SUMMARIZER__MAX_INPUT_TOKENS="8000")
async def test_a_summarize_retried_after_some_chunks_calls_only_the_others(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("SUM-RETRY", history=long_history()))
    stack.model.transcript["planning"] = ["Done.\n<promise>COMPLETE</promise>"]
    stack.model.inject(times=2)  # the first two chunks are summarized ...
    stack.model.inject(status=500)  # ... then the provider errs: attempt 1 of the summarize fails
    await stack.cards.move(ref, "planning", delivery_id="sum-retry")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1 and s.status != "running", timeout=90)
    run = state.history[0]
    assert (run.outcome, run.truncated_turns) == ("completed", 0), run.reason
    rows = [r for r in stack.store.ledger(ref.key) if r.purpose == "summary"]
    done = Counter(r.call_key for r in rows if r.status == "done")
    assert len(done) >= 4 and max(done.values()) == 1  # several chunks, none paid for twice
    failed = [r for r in rows if r.status == "failed"]
    assert [r.attempt for r in failed] == [1]
    # The retry (attempt 2) began with the chunk that had failed, not with the first one.
    assert sum(r.attempt == 1 and r.status == "done" for r in rows) == 2
    assert sum(r.attempt == 2 for r in rows) == len(done) - 2
    billed = stack.store.usage_totals(ref.key).total
    assert run.cost_usd == pytest.approx(float(billed.cost_usd)) == pytest.approx(state.cost_usd)
    assert run.summary_output_tokens == sum(r.output_tokens for r in rows)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false", CARDLOOP_SUMMARIZER__MAX_INPUT_TOKENS="8000")
async def test_a_summarize_that_fails_for_good_after_some_chunks_is_in_the_runs_cost(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("SUM-FAILED", history=long_history()))
    stack.model.transcript["planning"] = ["Done.\n<promise>COMPLETE</promise>"]
    stack.model.inject(times=2)  # the first two chunks are summarized, the third fails on every attempt
    stack.model.inject(status=500, times=3)
    await stack.cards.move(ref, "planning", delivery_id="sum-failed")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1 and s.status != "running", timeout=90)
    run = state.history[0]
    assert (run.outcome, run.truncated_turns) == ("completed", 1), run.reason
    rows = [r for r in stack.store.ledger(ref.key) if r.purpose == "summary"]
    paid = [r for r in rows if r.status == "done"]
    assert len(paid) == 2 and all(r.cost_usd > 0 for r in paid)
    billed = stack.store.usage_totals(ref.key).total
    print(f"summary chunks ${sum(float(r.cost_usd) for r in paid):.6f}, run ${run.cost_usd:.6f}, "
          f"billed ${float(billed.cost_usd):.6f}")
    assert run.cost_usd == pytest.approx(float(billed.cost_usd)) == pytest.approx(state.cost_usd)
    assert run.summary_output_tokens == sum(r.output_tokens for r in paid)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "summary-failed-in-run-cost")


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false", CARDLOOP_SUMMARIZER__MAX_INPUT_TOKENS="8000")
async def test_a_stage_cancelled_while_it_summarizes_ends_cancelled_with_the_chunks_it_paid(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("SUM-CANCEL", history=long_history()))
    stack.model.inject()  # the first chunk answers at once, the next takes its time: `card cancel` lands
    stack.model.inject(delay=3.0)
    await stack.cards.move(ref, "planning", delivery_id="sum-cancel")
    deadline = asyncio.get_running_loop().time() + 60
    while not (any(r.kept for r in stack.store.ledger(ref.key))
               and any(r.status == "calling" for r in stack.store.ledger(ref.key))):
        assert asyncio.get_running_loop().time() < deadline, "the summarizer never got to its second chunk"
        await asyncio.sleep(0.05)
    run = await stack.cards.cancel(ref, actor="Priya")
    assert run.outcome == "cancelled" and run.truncated_turns == 0, run.reason
    paid = [r for r in stack.store.ledger(ref.key) if r.kept and r.status == "done"]
    assert len(paid) == 1 and run.cost_usd == pytest.approx(float(paid[0].cost_usd))
    assert run.summary_output_tokens == paid[0].output_tokens
    assert not [r for r in stack.store.ledger(ref.key) if r.purpose != "summary"]  # no turn was called
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false", CARDLOOP_SUMMARIZER__MAX_INPUT_TOKENS="8000")
async def test_a_range_summarized_again_after_a_failed_summarize_pays_its_chunks_once(stack: Stack) -> None:
    # Turn 1's summarize summarizes two chunks, then fails for good on the third: the turn runs
    # on truncated history. Turn 2 folds the same range: the two chunks are paid for already.
    ref = stack.cards.import_card(small_card("SUM-AGAIN", history=long_history()))
    stack.model.transcript["planning"] = ["Working on it.", "Done.\n<promise>COMPLETE</promise>"]
    stack.model.inject(times=2)
    stack.model.inject(status=500, times=3)
    await stack.cards.move(ref, "planning", delivery_id="sum-again")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1 and s.status != "running", timeout=90)
    run = state.history[0]
    assert (run.outcome, run.iterations, run.truncated_turns) == ("completed", 2, 1), run.reason
    asked = Counter(json.dumps(r.body["messages"]) for r in stack.model.requests
                    if r.body and "Write the summary now" in json.dumps(r.body.get("messages")))
    # Only the chunk that failed was sent again (its three failed attempts, then turn 2's call).
    assert sorted(n for n in asked.values() if n > 1) == [4], sorted(asked.values())
    billed = stack.store.usage_totals(ref.key).total
    assert billed.calls == sum(asked.values()) + 2  # every summary call and the two turns
    assert run.cost_usd == pytest.approx(float(billed.cost_usd)) == pytest.approx(state.cost_usd)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
