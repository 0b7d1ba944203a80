"""A finished card keeps its state whatever arrives while its run closes and the next opens."""

from __future__ import annotations

import asyncio

import pytest

from cardloop.prompts.card import Card
from tests.stack import Stack

pytestmark = pytest.mark.timeout(180)


async def test_a_burst_on_a_finished_card_never_starts_a_run_without_its_state(stack: Stack) -> None:
    card = Card.model_validate({"id": "PAY-BURST", "tenant": "acme", "board": "generic", "title": "Burst",
                                "history": [{"role": "user", "content": "Test it."}]})
    ref = stack.cards.import_card(card)
    await stack.cards.move(ref, "testing", delivery_id="move-1")
    done = await stack.wait_state(ref, lambda s: s.status == "done", timeout=90)
    runs_before = done.stage_runs
    assert runs_before >= 1 and "move-1" in done.seen_deliveries

    # Comments on a finished card each open a run that records them and closes again; the
    # original move, replayed among them, must be recognised as seen by whichever run gets it.
    async def say(i: int) -> None:
        await stack.cards.say(ref, f"comment {i}", delivery_id=f"c-{i}")

    sends = [say(i) for i in range(60)]
    sends.insert(30, stack.cards.move(ref, "testing", delivery_id="move-1"))
    await asyncio.gather(*sends)

    def comments() -> list[str]:
        return sorted(m.content for m in stack.store.messages(ref.key) if m.content.startswith("comment "))

    def settled(state) -> bool:
        return state.status == "done" and len(comments()) == 60 and stack.store.workflow_state(ref.key) is not None

    final = await stack.wait_state(ref, settled, timeout=90)
    assert final.stage_runs == runs_before  # the replayed move ran nothing again
    assert final.seen_deliveries.count("move-1") == 1
    assert all(f"c-{i}" in final.seen_deliveries for i in range(60))
    assert comments() == sorted(f"comment {i}" for i in range(60))  # each stored once


async def test_a_card_whose_run_closed_before_it_ran_has_no_state(stack: Stack) -> None:
    """Terminated before any worker took its first task (no worker on that queue): Temporal cannot
    answer the state query for it ("closed before WorkflowTaskStarted"); the card has no state."""
    from temporalio.client import Client

    from cardloop.app.cards import CardService
    from cardloop.contracts.payloads import CardRef

    ref = CardRef(tenant="acme", board="generic", card_id="PAY-NEVER-RAN")
    idle: Client = stack.client
    cards = CardService(idle, stack.store, stack.config.model_copy(update={
        "temporal": stack.config.temporal.model_copy(update={"task_queue": "nobody-listens-here"})}))
    stack.cards.import_card(Card(id=ref.card_id, tenant="acme", board="generic", title="Never ran"))
    handle = await cards.move(ref, "planning", delivery_id="never-1")
    await idle.get_workflow_handle(handle.id).terminate("closed before any worker took it")
    assert await cards.state(ref) is None
