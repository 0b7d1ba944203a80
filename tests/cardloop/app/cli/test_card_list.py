"""`cardloop card list` and `card show` as a user runs them: live states from a real Temporal and
worker, costs from the store, the filters, the store's saved states when Temporal cannot be
reached, and `card show --last 0`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from cardloop.app.devserver import free_port
from tests.cardloop.app.cli.procs import CLI
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.conftest import ROOT
from tests.stack import NO_SOURCES, Stack, small_card

pytestmark = pytest.mark.timeout(120)


async def test_card_list_shows_stage_status_and_cost_and_filters(stack: Stack, tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_")},
           "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test", **NO_SOURCES,
           "CARDLOOP_TEMPORAL__ADDRESS": stack.config.temporal.address,
           "CARDLOOP_TEMPORAL__TASK_QUEUE": stack.task_queue, "DATABASE_URL": stack.store.url,
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}

    async def card(command: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        # On a thread: the worker answering the CLI's queries runs on this test's event loop.
        return await asyncio.to_thread(subprocess.run, [str(CLI), "card", command, *args], capture_output=True,
                                       text=True, cwd=ROOT, env={**env, **extra}, timeout=60)

    async def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return await card("list", *args, **extra)

    moved = stack.cards.import_card(small_card("LIST-1"))
    waiting = stack.cards.import_card(small_card("LIST-2").model_copy(update={"board": "linear"}))
    await stack.cards.move(moved, "testing", delivery_id="l1")
    await stack.wait_state(moved, lambda s: s.status == "done")

    out = await cli("--json")
    assert out.returncode == 0, out.stderr
    cards = {c["card"]: c for c in json.loads(out.stdout)["cards"]}
    assert set(cards) == {moved.key, waiting.key}
    done = cards[moved.key]
    assert (done["stage"], done["status"], done["stage_runs"], done["live"]) == ("done", "done", 1, True)
    assert done["cost_usd"] > 0
    assert (cards[waiting.key]["status"], cards[waiting.key]["cost_usd"]) == ("new", 0)

    table = await cli("--status", "done")
    assert table.returncode == 0, table.stderr
    header, row, footer = table.stdout.strip().splitlines()
    assert header.split()[:5] == ["CARD", "STAGE", "STATUS", "RUNS", "COST"]
    assert row.split()[:4] == [moved.key, "done", "done", "1"] and footer.startswith("1 card;")
    linear = await cli("--board", "linear", "--tenant", waiting.tenant, "--json")
    assert [c["card"] for c in json.loads(linear.stdout)["cards"]] == [waiting.key]

    # --last 0 is none (a slice [-0:] would have been every message); a negative count is bad usage.
    none = await card("show", moved.key, "--last", "0")
    assert none.returncode == 0, none.stderr
    count = stack.store.message_count(moved.key)
    assert count > 0 and f"history: {count} messages (last 0)" in none.stdout
    assert not [line for line in none.stdout.splitlines() if line.startswith("    [")]
    negative = await card("show", moved.key, "--last", "-1")
    assert negative.returncode == 2 and "negative" in negative.stderr

    # Temporal gone: the store's saved state (the card's run closed when it reached done), said so.
    offline = await cli("--json", CARDLOOP_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}")
    data = json.loads(offline.stdout)
    assert "is not reachable" in data["note"]
    offline_cards = {c["card"]: c for c in data["cards"]}
    assert offline_cards[moved.key]["live"] is False and offline_cards[moved.key]["status"] == "done"
    assert offline_cards[moved.key]["cost_usd"] == done["cost_usd"]


@pytest.mark.stack_env(CARDLOOP_RETRY__OVERLOAD_DEADLINE="0")
async def test_card_list_status_failed_is_a_card_standing_on_a_failed_run(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return await cardloop(env, "card", "list", *args)

    stack.model.inject(status=529)  # the first call gives up at once: the testing run fails
    failed = stack.cards.import_card(small_card("LIST-FAIL-1"))
    idle = stack.cards.import_card(small_card("LIST-FAIL-2"))
    await stack.cards.move(failed, "testing", delivery_id="f1")
    await stack.wait_state(failed, lambda s: bool(s.history) and s.history[-1].outcome == "failed")

    listed = await cli("--status", "failed", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(c["card"], c["status"]) for c in json.loads(listed.stdout)["cards"]] == [(failed.key, "failed")]
    # The failed card is not also "idle"; the never-moved one is "new", not idle either.
    plain_idle = await cli("--status", "idle", "--json")
    assert json.loads(plain_idle.stdout)["cards"] == []
    assert idle.key in {c["card"] for c in json.loads((await cli("--status", "new", "--json")).stdout)["cards"]}
    bad = await cli("--status", "broken")
    assert bad.returncode == 2 and "invalid choice: 'broken'" in bad.stderr


@pytest.mark.stack_env(CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_with_temporal_down_a_billed_card_whose_run_never_closed_is_unknown_not_new(
        stack: Stack, tmp_path: Path) -> None:
    """Found by a tester: with Temporal down, a card that had run (billed) but whose workflow never
    closed (nothing saved in the store) was listed "new", 0 runs, beside its cost. Only Temporal
    knows where it stands: "unknown". A card never moved is still "new"."""
    ran = stack.cards.import_card(small_card("LIST-OFF-1"))
    never = stack.cards.import_card(small_card("LIST-OFF-2"))
    await stack.cards.move(ran, "testing", delivery_id="o1")
    await stack.wait_state(ran, lambda s: bool(s.history) and s.status == "idle")  # idle: its run stays open
    assert stack.store.workflow_state(ran.key) is None
    env = {**cli_env(stack, tmp_path), "CARDLOOP_TEMPORAL__ADDRESS": f"127.0.0.1:{free_port()}"}
    listed = await cardloop(env, "card", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    cards = {c["card"]: c for c in json.loads(listed.stdout)["cards"]}
    assert cards[ran.key]["status"] == "unknown" and cards[ran.key]["cost_usd"] > 0
    assert (cards[never.key]["status"], cards[never.key]["cost_usd"]) == ("new", 0)
    unknown = await cardloop(env, "card", "list", "--status", "unknown")
    assert ran.key in unknown.stdout and never.key not in unknown.stdout
