"""`cardloop card retry` and what `card show` says about a failed card, as a user runs them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.stack import NO_SOURCES, Stack, small_card

pytestmark = pytest.mark.timeout(180)
CLI = Path(sys.executable).parent / "cardloop"


@pytest.mark.stack_env(CARDLOOP_RETRY__OVERLOAD_DEADLINE="0")
async def test_card_retry_reruns_a_failed_stage_and_refuses_otherwise(stack: Stack, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test", **NO_SOURCES,
           "CARDLOOP_TEMPORAL__ADDRESS": stack.config.temporal.address,
           "CARDLOOP_TEMPORAL__TASK_QUEUE": stack.task_queue, "DATABASE_URL": stack.store.url,
           # The stack's worker speaks plain payloads (the codec has its own tests).
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # On a thread: the worker answering the CLI's queries runs on this test's event loop.
        return await asyncio.to_thread(subprocess.run, [str(CLI), "card", *args], capture_output=True, text=True,
                                       cwd=ROOT, env=env, timeout=60)

    stack.model.inject(status=529)
    ref = stack.cards.import_card(small_card("CLI-RETRY-1"))
    early = await cli("retry", ref.key)
    assert early.returncode == 1 and "nothing to retry: it has no running workflow" in early.stderr
    assert "move the card to a stage to start one" in early.stderr and "workflow not found" not in early.stderr
    for command in ("retry", "cancel"):  # a key nobody imported: bad input, as `card show` says it
        unknown = await cli(command, "acme/github/NEVER-IMPORTED")
        assert unknown.returncode == 2 and "'acme/github/NEVER-IMPORTED' is not known to the store" in unknown.stderr
    await stack.cards.move(ref, "testing", delivery_id="t")
    await stack.wait_state(ref, lambda s: bool(s.history))
    shown = await cli("show", ref.key)
    assert shown.returncode == 0, shown.stderr
    assert "gave up: the model is overloaded" in shown.stdout
    assert f"failed: `cardloop card retry {ref.key}` runs testing again" in shown.stdout
    out = await cli("retry", ref.key, "--actor", "priya")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"card {ref.key}: running testing again (its history is kept)"
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [r.outcome for r in state.history] == ["failed", "completed"]
    again = await cli("retry", ref.key)
    assert again.returncode == 1 and "nothing to retry" in again.stderr and "Traceback" not in again.stderr
