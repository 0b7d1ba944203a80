"""`cardloop card cancel` says how many model calls the cancelled run made: that run's, not every
run of its stage's (real stack: Temporal dev server, the worker, SQLite, the scripted model, the
real command)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.mark.model_timeout(30)
@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_card_cancel_counts_the_calls_of_the_cancelled_run_only(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    stack.model.transcript["planning"] = ["Planned.\n<promise>COMPLETE</promise>"]
    ref = stack.cards.import_card(small_card("CANCEL-CALLS"))
    await stack.cards.move(ref, "planning", delivery_id="p1")
    await stack.wait_state(ref, lambda s: len(s.history) == 1 and s.status != "running")
    first_run = len(stack.store.ledger(ref.key))
    assert first_run >= 1
    stack.model.inject(delay=15.0)  # run 2's call waits for the model while it is cancelled
    await stack.cards.move(ref, "planning", delivery_id="p2")
    deadline = asyncio.get_running_loop().time() + 60
    while len(stack.store.ledger(ref.key)) <= first_run:  # run 2's call is in the ledger ("calling")
        assert asyncio.get_running_loop().time() < deadline, "run 2 never called the model"
        await asyncio.sleep(0.05)
    out = await cardloop(env, "card", "cancel", ref.key)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"card {ref.key}: cancelled planning run 2 after 1 turn(s); kept: ")
    assert ", 1 call(s) of this run in the ledger, " in out.stdout, out.stdout
