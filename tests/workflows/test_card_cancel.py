"""Cancelling a card is never mistaken for a move, even when a move arrives with it."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from cardloop.prompts.card import Card
from tests.stack import Stack, replay_all

pytestmark = pytest.mark.timeout(120)


def card(card_id: str) -> Card:
    return Card.model_validate({"id": card_id, "tenant": "acme", "board": "github", "title": "Cancel me",
                                "repo": "acme/payments-api", "history": [{"role": "user", "content": "Plan it."}]})


async def test_a_cancel_that_arrives_with_a_move_cancels_the_card(stack: Stack) -> None:
    stack.model.inject(delay=5.0)  # planning waits for the model while the card moves and is cancelled
    ref = stack.cards.import_card(card("PAY-CANCEL"))
    first = await stack.cards.move(ref, "planning", delivery_id="p")
    await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
    run = stack.client.get_workflow_handle(ref.workflow_id, run_id=first.result_run_id)
    # Often both land in one workflow task: the move cancels the stage, and the stage returns
    # normally; the card must still end cancelled instead of running the move's stage. (When the
    # move lands after the run closed, it starts a new run: that is a later move, not this run's.)
    await asyncio.gather(stack.cards.move(ref, "testing", delivery_id="t"), run.cancel())
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(run.result(follow_runs=False), timeout=60)
    assert (await run.describe()).status == WorkflowExecutionStatus.CANCELED
    children = [e.start_child_workflow_execution_initiated_event_attributes.workflow_id
                async for e in run.fetch_history_events()
                if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
    assert children == [f"{ref.workflow_id}/1-planning"]
    await replay_all(stack.client, run)


@pytest.mark.stack_env(CARDLOOP_TEMPORAL__CONTINUE_AS_NEW_AFTER_EVENTS="10")
async def test_card_cancel_answers_even_when_the_card_continues_as_new_right_after(stack: Stack) -> None:
    stack.model.inject(delay=10.0)  # planning waits for the model while it is cancelled
    ref = stack.cards.import_card(card("PAY-CANCEL-CAN"))
    first = await stack.cards.move(ref, "planning", delivery_id="p")
    await stack.wait_state(ref, lambda s: s.status == "running")
    run = await stack.cards.cancel(ref, actor="ops")  # the run is recorded, then the card continues as new
    assert (run.stage, run.run, run.outcome) == ("planning", 1, "cancelled")
    assert run.reason.startswith("cancelled by ops (card cancel)")
    old = stack.client.get_workflow_handle(ref.workflow_id, run_id=first.result_run_id)
    assert (await old.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    state = await stack.wait_state(ref, lambda s: s.status == "idle")
    assert [(r.stage, r.outcome) for r in state.history] == [("planning", "cancelled")]
    await replay_all(stack.client, old)
