"""`card show`'s usage line names the prompt tokens the provider's cache served and stored
beside the uncached input: it printed only the uncached part, a fraction of the prompt tokens a
provider's dashboard shows for the same calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_usage_names_cached_prompt_tokens(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    # A history long enough that the stable prefix passes the model's minimum for caching.
    history = [{"role": "user", "author": "maria", "content": f"Note {i}: " + "retry with capped backoff. " * 60}
               for i in range(8)]
    ref = stack.cards.import_card(small_card("USAGE-1", history=history))
    stack.model.transcript["planning"] = ["Plan one.", "Plan two.\n<promise>COMPLETE</promise>"]
    moved = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--wait")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    t = stack.store.usage_totals(ref.key).total
    assert t.cache_read_tokens > 0 and t.cache_write_tokens > 0  # the second turn read what the first wrote
    shown = await cardloop(env, "card", "show", ref.key)
    assert (f"usage: {t.calls} calls, {t.input_tokens:,} in (+{t.cache_read_tokens:,} read from the cache, "
            f"{t.cache_write_tokens:,} written to it), {t.output_tokens:,} out") in shown.stdout, shown.stdout
