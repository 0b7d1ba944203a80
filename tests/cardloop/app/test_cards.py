"""A finished card keeps its state whatever arrives while its run closes and the next opens."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.worker import Worker

from cardloop.app.cards import BUSY_RETRY_SECONDS
from cardloop.contracts import names
from cardloop.contracts.errors import RejectedError
from cardloop.contracts.payloads import CardRef, RetryRequest
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


@workflow.defn(name="BusyCard", sandboxed=False)
class BusyCard:
    """A card workflow's update surface that refuses like a busy card for its first second."""

    def __init__(self) -> None:
        self.refusals_until: datetime | None = None

    @workflow.run
    async def run(self, busy_seconds: float) -> None:
        self.refusals_until = workflow.now() + timedelta(seconds=busy_seconds)
        await workflow.wait_condition(lambda: False)

    @workflow.update(name=names.UPDATE_RETRY)
    def retry(self, req: RetryRequest) -> str:
        return "planning"

    @retry.validator
    def _busy(self, req: RetryRequest) -> None:
        if self.refusals_until is None or workflow.now() < self.refusals_until:
            raise ValueError(f"the card is between two steps; {names.TRY_AGAIN}")
        if req.actor == "nobody":
            raise ValueError("nothing to retry: its last stage run completed")


@pytest.mark.parametrize("busy", [1.0, 30.0])
async def test_an_update_refused_for_a_moment_is_asked_again(stack: Stack, busy: float) -> None:
    """A refusal ending in "try again in a moment" (a card between two steps, or starting) is asked
    again for a few seconds; one that lasts longer, and any other refusal, reaches the user."""
    ref = CardRef(tenant="acme", board="generic", card_id=f"PAY-BUSY-{int(busy)}")
    stack.cards.import_card(Card(id=ref.card_id, tenant="acme", board="generic", title="Busy"))
    queue = f"busy-{uuid.uuid4().hex[:8]}"
    async with Worker(stack.client, task_queue=queue, workflows=[BusyCard]):
        await stack.client.start_workflow("BusyCard", busy, id=ref.workflow_id, task_queue=queue)
        began = time.monotonic()
        if busy < BUSY_RETRY_SECONDS:
            assert await stack.cards.retry(ref, actor="maria") == "planning"
            assert time.monotonic() - began >= busy * 0.8  # it was refused, then asked again
            with pytest.raises(RejectedError, match="nothing to retry"):
                await stack.cards.retry(ref, actor="nobody")  # not a passing refusal: no second ask
        else:
            with pytest.raises(RejectedError, match=names.TRY_AGAIN):
                await stack.cards.retry(ref, actor="maria")
            assert BUSY_RETRY_SECONDS <= time.monotonic() - began < BUSY_RETRY_SECONDS + 5
        await stack.client.get_workflow_handle(ref.workflow_id).terminate("test over")




@workflow.defn(name="ClosingCard", sandboxed=False)
class ClosingCard:
    """A card workflow that closes (completes, or continues as new) with a retry unanswered, which
    Temporal then drops: "closing" gets it while its last task runs (it completes on a signal and
    blocks that task for a second), "accepted" and "continue" accept it first. The run continued
    as new answers."""

    def __init__(self) -> None:
        self.asked = False
        self.closing = False
        self.answering = False

    @workflow.run
    async def run(self, then: str) -> None:
        self.answering = then == "answer"
        await workflow.wait_condition(lambda: (self.asked or self.closing) and not self.answering)
        if then == "closing":
            time.sleep(1.0)  # the update arrives meanwhile, before the run completes
        if then == "continue":
            workflow.continue_as_new("answer")

    @workflow.signal(name="close")
    def close(self) -> None:
        self.closing = True

    # Left unanswered on purpose: ABANDON keeps the SDK's warning about it out of the test's output.
    @workflow.update(name=names.UPDATE_RETRY, unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def retry(self, req: RetryRequest) -> str:
        self.asked = True
        await workflow.wait_condition(lambda: self.answering)
        return "planning"


@pytest.mark.parametrize("then", ["closing", "accepted", "continue"])
async def test_an_update_dropped_by_the_run_closing_says_so_or_reaches_the_next_run(stack: Stack, then: str) -> None:
    """A retry that meets the card's run closing is dropped by Temporal, not applied. On a card that
    finished, the user reads how it closed, as for a card already closed (not Temporal's wording
    about updates); on a run that continued as new, it is asked again of the new run."""
    ref = CardRef(tenant="acme", board="generic", card_id=f"PAY-CLOSING-{then}")
    stack.cards.import_card(Card(id=ref.card_id, tenant="acme", board="generic", title="Closing"))
    queue = f"closing-{uuid.uuid4().hex[:8]}"
    async with Worker(stack.client, task_queue=queue, workflows=[ClosingCard]):
        handle = await stack.client.start_workflow("ClosingCard", then, id=ref.workflow_id, task_queue=queue)
        if then == "continue":
            assert await stack.cards.retry(ref, actor="maria") == "planning"
            assert (await handle.describe()).run_id != handle.result_run_id  # answered by the next run
            await stack.client.get_workflow_handle(ref.workflow_id).terminate("test over")
            return
        if then == "closing":
            await handle.signal("close")
            await asyncio.sleep(0.3)
        with pytest.raises(RejectedError, match=r"nothing to retry: it has no running workflow "
                                                r"\(its last run completed; move the card to a stage to start one\)$"):
            await stack.cards.retry(ref, actor="maria")


async def test_an_update_no_worker_takes_is_one_line_naming_the_task_queue(stack: Stack) -> None:
    """The card's workflow exists but no worker polls its queue (all stopped, or stuck): the
    update times out inside Temporal's client; the user reads one line saying so (exit 2 / 503)."""
    from cardloop.app.temporal import TemporalUnavailable

    ref = CardRef(tenant="acme", board="generic", card_id="PAY-NO-WORKER")
    stack.cards.import_card(Card(id=ref.card_id, tenant="acme", board="generic", title="Nobody polls"))
    await stack.client.start_workflow("BusyCard", 0.0, id=ref.workflow_id, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")
    began = time.monotonic()
    with pytest.raises(TemporalUnavailable, match=r"no worker answered the retry in time; is a worker running on "
                                                  r"task queue test-\w+\?"):
        await stack.cards.retry(ref, actor="maria", timeout=3.0)
    assert time.monotonic() - began < 10
    await stack.client.get_workflow_handle(ref.workflow_id).terminate("test over")
