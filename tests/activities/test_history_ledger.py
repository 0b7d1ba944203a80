"""Every summarizer call has a ledger row of its own, on the real stack (Temporal dev server, a
worker, SQLite, the scripted model on loopback): a summarize of a range whose earlier summarize
failed for good makes new calls, and they must not write over the earlier calls' rows."""

from __future__ import annotations

import pytest

from cardloop.prompts.card import Message
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(120)


def long_history() -> list[dict]:
    return [Message(role="user" if i % 2 == 0 else "assistant",
                    content=f"Message {i}: " + "details about retries and backoff " * 60).model_dump()
            for i in range(120)]


def messages_requests(stack: Stack) -> int:
    return sum(1 for r in stack.model.requests if r.method == "POST" and r.path.startswith("/v1/messages"))


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_second_summarize_of_a_range_keeps_the_first_ones_rows(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("SUM-LEDGER", history=long_history()))
    stack.model.transcript["planning"] = ["Working on it.", "Done.\n<promise>COMPLETE</promise>"]
    stack.model.inject(status=500, times=3)  # every attempt of turn 1's summarize fails: truncated
    await stack.cards.move(ref, "planning", delivery_id="sum-ledger")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1 and s.status != "running", timeout=90)
    assert state.history[0].outcome == "completed" and state.history[0].truncated_turns == 1
    rows = [r for r in stack.store.ledger(ref.key) if r.purpose == "summary"]
    # Turn 2 summarized the same range again: its call is attempt 1 of a new activity.
    assert sorted((r.attempt, r.status) for r in rows) == [(1, "done"), (1, "failed"), (2, "failed"),
                                                           (3, "failed")]
    totals = stack.store.usage_totals(ref.key).total
    assert totals.calls == messages_requests(stack) == len(stack.store.ledger(ref.key))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
