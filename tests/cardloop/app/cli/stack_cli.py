"""The real `cardloop` command against the test's stack (its Temporal, task queue and store),
run as a process on a thread: the worker answering its calls runs on the test's event loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.stack import NO_SOURCES, Stack

CLI = Path(sys.executable).parent / "cardloop"


def cli_env(stack: Stack, home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-test", **NO_SOURCES,
            "CARDLOOP_TEMPORAL__ADDRESS": stack.config.temporal.address,
            "CARDLOOP_TEMPORAL__TASK_QUEUE": stack.task_queue, "DATABASE_URL": stack.store.url,
            # The stack's worker speaks plain payloads (the codec has its own tests).
            "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}


async def cardloop(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, [str(CLI), *args], capture_output=True, text=True,
                                   cwd=ROOT, env=env, timeout=timeout)
