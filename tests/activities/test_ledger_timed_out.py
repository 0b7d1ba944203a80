"""A model call that got no answer in time may still have run at the provider (and been billed):
its ledger row says so and counts with the calls whose usage is unknown, not as a call billed $0
(real stack: Temporal dev server, a worker, SQLite, the scripted model on loopback)."""

from __future__ import annotations

import pytest

from cardloop.store.values import TIMED_OUT
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(120)


@pytest.mark.model_timeout(1)
@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_timed_out_attempt_is_usage_unknown_and_the_retry_is_billed(stack: Stack) -> None:
    stack.model.inject(delay=4.0)  # the first attempt's answer comes after the client gave up
    ref = stack.cards.import_card(small_card("LEDGER-TIMEOUT"))
    await stack.cards.move(ref, "planning", delivery_id="p")
    await stack.wait_state(ref, lambda s: bool(s.history), timeout=90)
    rows = stack.store.ledger(ref.key)
    first, *rest = [r for r in rows if r.stage == "planning"]
    assert (first.status, first.note, first.cost_usd) == ("failed", TIMED_OUT, 0)
    assert rest and rest[-1].status == "done" and rest[-1].cost_usd > 0
    totals = stack.store.usage_totals(ref.key)
    assert totals.unknown == 1  # not "billed $0": the provider may have run it


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_an_error_answer_is_no_unknown_usage(stack: Stack) -> None:
    stack.model.inject(status=529)  # overloaded: the provider answered, nothing ran, nothing billed
    ref = stack.cards.import_card(small_card("LEDGER-529"))
    await stack.cards.move(ref, "planning", delivery_id="p")
    await stack.wait_state(ref, lambda s: bool(s.history), timeout=90)
    failed = [r for r in stack.store.ledger(ref.key) if r.status == "failed"]
    assert failed and all(r.note != TIMED_OUT for r in failed)
    assert stack.store.usage_totals(ref.key).unknown == 0
