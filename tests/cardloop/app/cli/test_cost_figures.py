"""One card's cost, end to end on the real stack (Temporal dev server, the worker, SQLite, the
scripted model on loopback, the real `cardloop` command): a run that summarizes its long history,
researches a log too large for its prompt, and reads its prompt from the provider's cache over
several turns is one dollar figure everywhere a person reads it: the ledger, `card move --wait`'s
closing line, `card show`, `card list`, the card's state, its stage runs and /metrics."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cardloop.contracts.payloads import tokens_spent
from cardloop.prompts.card import Message
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, replay_all, small_card
from tests.workflows.research_kit import big_log_source

__all__ = ["big_log_source"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def stack_overrides(big_log_source: None) -> dict[str, str]:
    return {"CARDLOOP_CONTEXT__SOURCES__ERROR_FIXING": '["big_log"]',
            "CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE": "false"}


def metrics_cost() -> float:
    """cardloop_cost_usd_total over every stage and model, as the worker's /metrics serves it."""
    exposed = generate_latest(REGISTRY).decode()
    return sum(s.value for f in text_string_to_metric_families(exposed) for s in f.samples
               if s.name == "cardloop_cost_usd_total")


def long_history() -> list[dict]:
    return [Message(role="user" if i % 2 == 0 else "assistant",
                    content=f"Message {i}: " + "details about retries and backoff " * 60).model_dump()
            for i in range(120)]


async def test_one_card_costs_the_same_in_every_figure(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    stack.model.transcript["error_fixing"] = ["Reading the report first.", "Still checking the pool settings.",
                                              "Fixed.\n<promise>COMPLETE</promise>"]
    before = metrics_cost()
    ref = stack.cards.import_card(small_card("COST-1", title="The nightly build fails", history=long_history()))
    moved = await cardloop(env, "card", "move", ref.key, "--to", "error_fixing", "--wait", timeout=240)
    assert moved.returncode == 0, moved.stdout + moved.stderr

    rows = stack.store.ledger(ref.key)
    purposes = {r.purpose for r in rows}
    assert {"summary", "research"} <= purposes, purposes  # every kind of call the run pays for
    assert all(r.status == "done" and r.kept for r in rows)  # nothing extra: every figure is the run's
    assert sum(r.cache_read_tokens for r in rows) > 0
    ledger = sum((r.cost_usd for r in rows), Decimal(0))
    usd = f"${float(ledger):.4f}"

    state = await stack.cards.state(ref)
    assert state is not None and [r.outcome for r in state.history] == ["completed"]
    [run] = state.history
    print(f"ledger {float(ledger):.6f} run {run.cost_usd:.6f} state {state.cost_usd:.6f} "
          f"metrics {metrics_cost() - before:.6f}; {len(rows)} calls; {moved.stdout.strip().splitlines()[-1]}")
    assert run.cost_usd == pytest.approx(float(ledger)) and state.cost_usd == pytest.approx(float(ledger))
    closing = next(ln for ln in moved.stdout.splitlines() if ln.startswith("  ✓ error_fixing run 1: completed"))
    assert f", {usd}: " in closing
    # Every token the cost paid for is on that line: the ledger's, cached ones included.
    paid = sum(r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens for r in rows)
    assert f" {paid:,} tokens (" in closing
    assert tokens_spent(run) == paid  # ... which is what the stage's token budget counts

    shown = await cardloop(env, "card", "show", ref.key)
    assert shown.returncode == 0, shown.stderr
    usage = next(ln for ln in shown.stdout.splitlines() if ln.startswith("  usage: "))
    assert f"billed {usd} (retries included)" in usage
    as_json = json.loads((await cardloop(env, "card", "show", ref.key, "--json")).stdout)
    assert Decimal(str(as_json["usage"]["total"]["cost_usd"])) == ledger

    listed = await cardloop(env, "card", "list")
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(ref.key))
    assert f" {usd} " in line
    [card] = json.loads((await cardloop(env, "card", "list", "--json")).stdout)["cards"]
    assert card["cost_usd"] == pytest.approx(float(ledger))

    assert metrics_cost() - before == pytest.approx(float(ledger))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
