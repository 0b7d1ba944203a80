"""A stage's line (the demo's, and `card move --wait`'s) counts the summarizer's tokens and the
prompt tokens the provider's cache served or stored when its cost does: the tokens shown are the
ones the cost shown paid for, as the ledger has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.app.demo import run_stage
from cardloop.prompts.card import Message
from cardloop.store.values import UsageSum
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(240)


def long_card(card_id: str):
    history = [Message(role="user" if i % 2 == 0 else "assistant",
                       content=f"Message {i}: " + "details about retries and backoff " * 60) for i in range(120)]
    return small_card(card_id, history=[m.model_dump() for m in history])


@pytest.mark.stack_env(CARDLOOP_STAGES__CODING__AUTO_ADVANCE="false")
async def test_the_stage_line_counts_the_summarizers_tokens_with_its_cost(stack: Stack, tmp_path: Path) -> None:
    stack.model.transcript["coding"] = ["Done.\n<promise>COMPLETE</promise>"] * 4
    ref = stack.cards.import_card(long_card("SUM-TOK-1"))
    out = await cardloop(cli_env(stack, tmp_path), "card", "move", ref.key, "--to", "coding", "--wait",
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    state = await stack.cards.state(ref)
    assert state is not None
    run = state.history[-1]
    usage = stack.store.usage_totals(ref.key).by_stage
    summary, turns = usage["summary"], usage["coding"]
    assert summary.calls >= 1  # the long history was folded by the summarizer
    assert (run.summary_input_tokens, run.summary_output_tokens) == (summary.input_tokens, summary.output_tokens)
    assert run.cost_usd == pytest.approx(float(summary.cost_usd + turns.cost_usd))
    read, written = cached(summary, turns)
    assert read + written > 0  # the summarizer's and the turn's system prompts are cached
    assert (run.cache_read_tokens, run.cache_write_tokens) == (read, written)
    total = turns.input_tokens + turns.output_tokens + summary.input_tokens + summary.output_tokens + read + written
    said = f"{total:,} tokens ({summary.input_tokens + summary.output_tokens:,} of them the summarizer's; " \
           f"{cache_words(read, written)})"
    assert f"  ✓ coding run 1: completed after 1 turn(s), {said}, ${run.cost_usd:.4f}" in out.stdout
    # The demo's per-stage line says the same of its own card's run.
    demo_card = stack.cards.import_card(long_card("SUM-TOK-2"))
    lines: list[str] = []
    await run_stage(stack.cards, demo_card, "coding", 120, lines.append)
    demo_usage = stack.store.usage_totals(demo_card.key).by_stage
    s2, t2 = demo_usage["summary"], demo_usage["coding"]
    assert s2.calls >= 1
    line = next(ln for ln in lines if ln.startswith("  ✓ coding: completed"))
    read, written = cached(s2, t2)
    total = t2.input_tokens + t2.output_tokens + s2.input_tokens + s2.output_tokens + read + written
    cost = float(s2.cost_usd + t2.cost_usd)
    assert f"after 1 turn(s), {total:,} tokens ({s2.input_tokens + s2.output_tokens:,} of them the " \
           f"summarizer's; {cache_words(read, written)}), ${cost:.4f}: " in line


def cached(*sums: UsageSum) -> tuple[int, int]:
    return sum(s.cache_read_tokens for s in sums), sum(s.cache_write_tokens for s in sums)


def cache_words(read: int, written: int) -> str:
    """As card show's usage line says them."""
    return ", ".join(w for w in (f"{read:,} read from the cache" if read else "",
                                 f"{written:,} written to it" if written else "") if w)
