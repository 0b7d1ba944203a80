"""Prompt caching over a long coding stage, through the real workflows.

A 30-turn coding stage on examples/card.json (its long history, notes and context), on the
Temporal dev server with a worker, the store and the scripted Anthropic model, whose usage
follows Anthropic's published cache rules: a read happens only at a cache_control breakpoint
whose exact prefix was written before, a prefix under the minimum cacheable length (1024
tokens) is never cached, entries live 5 minutes. Each model reply is unique and long enough
that the history passes its budget and must be folded. Prints, from the ledger:

    billed_input_ratio        input billed with caching (uncached + 0.1 x reads + 1.25 x writes)
                              / the same prompts' input uncached                    target <= 0.25
    cache_read_share          tokens read from the cache / all prompt tokens          target >= 0.8
    summarize_calls_per_turn  summarizer calls / turns, from the first turn over budget  target <= 0.2

Run: .venv/bin/python bench/caching.py [--turns 30] [--reply-tokens 700]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.startup import load_config
from cardloop.app.worker import build_worker
from cardloop.contracts.config import REPO_CONFIG
from cardloop.prompts.card import Card
from cardloop.store import Store

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("planning", "coding", "review", "testing", "error_fixing")
PARAGRAPH = ("Checked `app/webhooks/retry.py` against ADR-0007 again: the cap applies before the jitter, "
             "the schedule with jitter off is 1, 2, 4, 8, 16, 30; `tests/test_retry.py` covers it. ")


def replies(turns: int, reply_tokens: int) -> list[str]:
    """Unique replies of about `reply_tokens` tokens (no completion signal: the stage runs all turns)."""
    body = PARAGRAPH * max(1, reply_tokens * 4 // len(PARAGRAPH))
    return [f"Turn {n}: progress note {n * 7919 % 10007}.\n\n{body}" for n in range(1, turns + 1)]


async def run(turns: int, reply_tokens: int, *, verbose: bool = False) -> dict[str, float | int | str]:
    with tempfile.TemporaryDirectory(prefix="cardloop-caching-") as tmp, \
            TemporalDevServer(port=free_port(), ui_port=None, retention=None,
                              log_file=Path(tmp) / "temporal.log") as server:
        model = ScriptedModel({"coding": replies(turns, reply_tokens)}).start()
        env = {"ANTHROPIC_API_KEY": "sk-ant-bench", "CARDLOOP_TEMPORAL__ADDRESS": server.address,
               "CARDLOOP_TEMPORAL__TASK_QUEUE": "bench-caching",
               "CARDLOOP_STAGES__CODING__MAX_ITERATIONS": str(turns),
               "CARDLOOP_STAGES__CODING__TOKEN_BUDGET": "100000000",
               "CARDLOOP_STAGES__CODING__COST_BUDGET_USD": "0",
               "CARDLOOP_STAGES__CODING__AUTO_ADVANCE": "false",
               **{f"CARDLOOP_CONTEXT__SOURCES__{s.upper()}": "[]" for s in STAGES}}
        config = load_config(REPO_CONFIG, env)
        store = Store.open(f"sqlite:///{tmp}/store.sqlite")
        deps = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        worker = build_worker(client, deps)
        task = asyncio.create_task(worker.run())
        try:
            cards = CardService(client, store, config)
            card = Card.model_validate_json((ROOT / "examples" / "card.json").read_text(encoding="utf-8"))
            ref = cards.import_card(card.model_copy(update={"id": "BENCH-CACHE-1"}))
            await cards.move(ref, "coding", delivery_id="bench")
            state = await cards.wait_for(ref, lambda s: bool(s.history) and s.status != "running", timeout=900)
            run = state.history[-1]
            ledger = store.ledger(ref.key)
        finally:
            await worker.shutdown()
            await asyncio.gather(task, return_exceptions=True)
            model.stop()
        turn_requests = [r for r in model.requests
                         if r.path.endswith("/messages") and "# Stage:" in json.dumps(r.body.get("system"))]
        if verbose:
            for r in sorted(ledger, key=lambda r: [int(p) if p.isdigit() else p
                                                   for p in re.split(r"(\d+)", r.call_key)]):
                print(f"{r.call_key.rsplit('/', 1)[-1]:<24} {r.purpose:<8} in {r.input_tokens:>6} "
                      f"read {r.cache_read_tokens:>6} write {r.cache_write_tokens:>6}", file=sys.stderr)
        if verbose:
            _print_prefix_changes(turn_requests)
        figures = _figures(ledger, turn_requests)
        figures.update(stage_outcome=run.outcome, stage_iterations=run.iterations)
        store.close()
        return figures


def _blocks(body: dict) -> list[str]:
    """A request's content blocks in prefix order (system, then each message's blocks)."""
    out = [f"system {json.dumps(b, sort_keys=True)}" for b in body.get("system") or []]
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        out += [f"{m['role']} {json.dumps({k: v for k, v in b.items() if k != 'cache_control'}, sort_keys=True)}"
                for b in content]
    return out


def _print_prefix_changes(turn_requests: list) -> None:
    """For each turn, the first block that differs from the previous turn's request: where the
    cacheable prefix broke, and the breakpoints it carried."""
    previous: list[str] = []
    for n, r in enumerate(turn_requests, 1):
        blocks = _blocks(r.body)
        same = next((i for i, (a, b) in enumerate(zip(previous, blocks, strict=False)) if a != b),
                    min(len(previous), len(blocks)))
        content = [b for m in r.body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
        marks = [i for i, b in enumerate(content) if "cache_control" in b]
        print(f"request {n:>2}: {len(blocks)} blocks, same as previous up to block {same}; "
              f"message breakpoints at blocks {marks}", file=sys.stderr)
        previous = blocks


def _figures(ledger: list, turn_requests: list) -> dict[str, float | int | str]:
    """From the ledger (what the provider billed, per call) and the turns' requests."""
    turns = [r for r in ledger if r.purpose == "turn"]
    summaries = [r for r in ledger if r.purpose == "summary"]
    total = sum(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens for r in turns)
    read = sum(r.cache_read_tokens for r in turns)
    write = sum(r.cache_write_tokens for r in turns)
    plain = sum(r.input_tokens for r in turns)
    billed = plain + 0.1 * read + 1.25 * write
    folded = [i for i, r in enumerate(turn_requests)
              if "<conversation_summary" in json.dumps(r.body["messages"]) or "pinned_facts" in json.dumps(r.body)]
    over_budget_turns = max(1, len(turn_requests) - folded[0]) if folded else 0
    return {
        "turns": len(turns),
        "prompt_tokens": total,
        "billed_input_ratio": round(billed / total, 3) if total else 0.0,
        "cache_read_share": round(read / total, 3) if total else 0.0,
        "first_turn_over_budget": folded[0] + 1 if folded else 0,
        "summarize_calls": len(summaries),
        "summarize_calls_per_turn": round(len(summaries) / over_budget_turns, 3) if over_budget_turns else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--reply-tokens", type=int, default=700)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="print each call's usage")
    args = parser.parse_args()
    figures = asyncio.run(run(args.turns, args.reply_tokens, verbose=args.verbose))
    if args.json:
        print(json.dumps(figures))
    else:
        targets = {"billed_input_ratio": "<= 0.25", "cache_read_share": ">= 0.8", "summarize_calls_per_turn": "<= 0.2"}
        for key, value in figures.items():
            print(f"{key:<26} {value:<12} {targets.get(key, '')}")
    ok = (figures["billed_input_ratio"] <= 0.25 and figures["cache_read_share"] >= 0.8
          and figures["summarize_calls_per_turn"] <= 0.2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
