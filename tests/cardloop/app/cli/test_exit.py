"""`cardloop card ...` against a busy stack exits with its own code, never with the interpreter's
abort at exit ("Fatal Python error: PyGILState_Release", exit -6).

The cause: the Temporal SDK completes RPCs on its Rust runtime's threads and calls back into
Python; one still in flight while the interpreter finalizes aborts the process. A busy server
makes that likely: a call whose wait timed out (`temporal.rpc_timeout`) is left in flight as the
command exits. cardloop.app.cli.main.run exits without finalization on every path."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tests.cardloop.app.cli.procs import CLI
from tests.conftest import ROOT
from tests.stack import NO_SOURCES, Stack, small_card

pytestmark = pytest.mark.timeout(120)


async def test_card_commands_exit_cleanly_against_a_busy_stack(stack: Stack, tmp_path: Path) -> None:
    stack.model.latency = 0.3  # every model turn takes a while: the worker stays busy
    refs = [stack.cards.import_card(small_card(f"BUSY-{i}")) for i in range(4)]
    for ref in refs:
        await stack.cards.move(ref, "planning", delivery_id="p")
    env = {**os.environ, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test", **NO_SOURCES,
           "CARDLOOP_TEMPORAL__ADDRESS": stack.config.temporal.address,
           "CARDLOOP_TEMPORAL__TASK_QUEUE": stack.task_queue, "DATABASE_URL": stack.store.url,
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}
    # Half of the runs give up waiting for the server at once, leaving their signal RPC in flight
    # when the process exits: the case that aborted finished commands.
    hurried = {**env, "CARDLOOP_TEMPORAL__RPC_TIMEOUT": "0.000001"}

    def move(i: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CLI), "card", "move", refs[i % len(refs)].key, "--to", "review",
                               "--delivery-id", f"busy-{i}"], capture_output=True, text=True, cwd=ROOT,
                              env=hurried if i % 2 else env, timeout=60)

    # On threads: the worker keeping the stack busy runs on this test's event loop.
    runs = await asyncio.gather(*(asyncio.to_thread(move, i) for i in range(4)))
    for i, run in enumerate(runs):
        assert "Fatal Python error" not in run.stderr and run.returncode >= 0, run.stderr
        if i % 2:
            assert run.returncode == 2, run.stdout + run.stderr
            assert "did not answer the signal within 1e-06 s" in run.stderr and "Traceback" not in run.stderr
        else:
            assert run.returncode == 0, run.stderr
            assert f"card {refs[i % len(refs)].key} -> review" in run.stdout
