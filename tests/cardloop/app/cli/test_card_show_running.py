"""`cardloop card show` on a card whose stage is running: the turn in progress and what it does,
from the stage run itself (the card's own copy, state.current, arrives only after a turn)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.mark.model_timeout(30)  # the stack's 5 s would end the held call early: the card moved on under load
async def test_card_show_says_which_turn_runs_and_what_it_does(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    stack.model.inject(delay=15.0)  # planning's first model call: the turn in progress while we look
    ref = stack.cards.import_card(small_card("SHOW-RUN-1"))
    await stack.cards.move(ref, "planning", delivery_id="p")
    for _ in range(200):
        state = await stack.cards.state(ref)
        turn = await stack.cards.running_turn(ref, state) if state else None
        if turn is not None and turn.doing.startswith("waiting for the model"):
            break
        await asyncio.sleep(0.1)
    shown = await cardloop(env, "card", "show", ref.key)
    assert shown.returncode == 0, shown.stderr
    now = next(ln for ln in shown.stdout.splitlines() if ln.startswith("  now: "))
    max_turns = stack.config.stages["planning"].max_iterations
    assert now.startswith(f"  now: planning run 1, turn 1 of {max_turns}: waiting for the model (")
    budget = stack.config.stages["planning"].token_budget
    assert now.endswith(f"prompt tokens); so far 0 tokens of its {budget:,}-token budget, $0.0000")
    as_json = await cardloop(env, "card", "show", ref.key, "--json")
    data = json.loads(as_json.stdout)
    assert data["state"]["status"] == "running"
    assert data["state"]["current"]["iteration"] == 1  # was null until the first turn ended
    assert data["state"]["current"]["doing"].startswith("waiting for the model")
    assert data["now"] == now.removeprefix("  now: ")
    idle = await cardloop(env, "card", "show", "acme/github/SHOW-RUN-1", "--last", "-1")
    assert idle.returncode == 2 and "Traceback" not in idle.stderr


@pytest.mark.model_timeout(30)
async def test_the_now_line_counts_the_cached_prompt_tokens_the_run_paid_for(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    stack.model.transcript["planning"] = ["Looking at the code first.", "Planned.\n<promise>COMPLETE</promise>"]
    stack.model.inject()               # turn 1 answers at once (its system prompt is written to the cache) ...
    stack.model.inject(delay=15.0)     # ... turn 2 waits for the model while we look
    # A history long enough for a cache breakpoint (the model's minimum prefix), too short to fold.
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"Note {i}: " + "the retries back off exponentially " * 50} for i in range(6)]
    ref = stack.cards.import_card(small_card("SHOW-RUN-CACHE", history=history))
    await stack.cards.move(ref, "planning", delivery_id="p")
    for _ in range(300):
        state = await stack.cards.state(ref)
        turn = await stack.cards.running_turn(ref, state) if state else None
        if turn is not None and turn.iteration == 2 and turn.doing.startswith("waiting for the model"):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("turn 2 never waited for the model")
    [first] = [r for r in stack.store.ledger(ref.key) if r.status == "done"]
    assert first.cache_write_tokens > 0
    shown = await cardloop(env, "card", "show", ref.key)
    assert shown.returncode == 0, shown.stderr
    now = next(ln for ln in shown.stdout.splitlines() if ln.startswith("  now: "))
    # What its token budget counts: the cached prompt tokens too (the closing line's figure).
    cached = f"{first.cache_read_tokens:,} read from the cache, " if first.cache_read_tokens else ""
    spent = first.input_tokens + first.output_tokens + first.cache_read_tokens + first.cache_write_tokens
    budget = stack.config.stages["planning"].token_budget
    assert now.endswith(f"so far {spent:,} tokens ({cached}{first.cache_write_tokens:,} written to it) of its "
                        f"{budget:,}-token budget, ${float(first.cost_usd):.4f}"), now
