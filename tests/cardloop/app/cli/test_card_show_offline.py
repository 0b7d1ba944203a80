"""`card show` with Temporal out of reach: what the store holds (the card, the stage runs its last
closed run saved, the bill, the history) with a note saying so, as `card list` does then, instead
of exit 2 and nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cardloop.app.devserver import free_port
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_show_without_temporal_says_what_the_store_holds(stack: Stack, tmp_path: Path) -> None:
    stack.model.transcript["planning"] = ["Plan: cap the delay.\n<promise>COMPLETE</promise>"]
    ref = stack.cards.import_card(small_card("OFF-1"))
    await stack.cards.move(ref, "planning", delivery_id="p1")
    await stack.wait_state(ref, lambda s: len(s.history) >= 1 and s.status != "running", timeout=120)
    await stack.cards.move(ref, "done", delivery_id="d1")  # the run closes: its state is saved
    deadline = asyncio.get_running_loop().time() + 60
    while stack.store.workflow_state(ref.key) is None:
        assert asyncio.get_running_loop().time() < deadline, "the closed run saved no state"
        await asyncio.sleep(0.05)

    env = {**cli_env(stack, tmp_path), "CARDLOOP_TEMPORAL__ADDRESS": f"127.0.0.1:{free_port()}"}
    shown = await cardloop(env, "card", "show", ref.key, "--last", "2")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"card {ref.key}: {small_card('OFF-1').title}"
    assert lines[1].startswith("  note: Temporal at 127.0.0.1:") and "is not reachable" in lines[1], shown.stdout
    assert "last closed run saved" in lines[1]
    assert "  stage done · done · stage runs 1" in lines, shown.stdout
    assert any(" planning " in line and "completed" in line for line in lines), shown.stdout
    assert any(line.startswith("  usage: 1 calls") for line in lines), shown.stdout
    doc = json.loads((await cardloop(env, "card", "show", ref.key, "--json")).stdout)
    assert "is not reachable" in doc["offline"] and doc["state"]["history"][0]["outcome"] == "completed"

    # A card the store does not know is still bad input, Temporal or not.
    unknown = await cardloop(env, "card", "show", "acme/github-projects/NOT-THERE")
    assert unknown.returncode == 2 and "is not known to the store" in unknown.stderr, unknown.stderr
