"""A model call whose stage is cancelled while it waits for the model is billed when its answer
comes back, and both the ledger and /metrics say it was cancelled (real stack: Temporal dev
server, a worker, SQLite, the scripted model on loopback)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(120)


def model_calls(stage: str, result: str) -> float:
    """What the worker's /metrics serves (the process's default registry) for the counter."""
    return sum(s.value for f in REGISTRY.collect() for s in f.samples
               if s.name == "cardloop_model_calls_total" and s.labels.get("stage") == stage
               and s.labels.get("result") == result)


async def _until(check, what: str, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.mark.model_timeout(30)
async def test_a_call_cancelled_mid_flight_is_counted_cancelled_not_ok(stack: Stack) -> None:
    before = {r: model_calls("planning", r) for r in ("ok", "cancelled")}
    stack.model.inject(delay=7.0)  # the answer comes after the cancel reached the activity (a heartbeat)
    ref = stack.cards.import_card(small_card("LEDGER-CANCEL"))
    await stack.cards.move(ref, "planning", delivery_id="p")
    await _until(lambda: stack.model.request_count >= 1, "the model call")
    run = await stack.cards.cancel(ref, actor="ops")
    assert run.outcome == "cancelled"
    await _until(lambda: [r.status for r in stack.store.ledger(ref.key)] == ["cancelled"], "the settled row")
    row = stack.store.ledger(ref.key)[0]
    assert row.cost_usd > 0  # billed: the provider answered
    assert model_calls("planning", "cancelled") - before["cancelled"] == 1
    assert model_calls("planning", "ok") - before["ok"] == 0
