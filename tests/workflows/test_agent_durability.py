"""The coding agent survives losing the worker that holds its workspace (a `cardloop worker`
process SIGKILLed mid-stage), and a Temporal restart:
the stage finishes on another worker from the last checkpoint on the remote branch, with no
commit made twice, and its histories replay."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.worker import CardloopWorker, build_worker
from cardloop.contracts.config import Config
from cardloop.contracts.payloads import CardState
from cardloop.store import Store
from tests.sample_remote import Remote, push_sample_repo
from tests.stack import NO_SOURCES, ROOT, make_config, replay_all, small_card, terminate_running
from tests.workflows.agent_kit import AGENT

pytestmark = pytest.mark.timeout(300)

BRANCH = "card/PAY-1"
FIXED = "capped = min(raw, self.max_delay)\n        if self.jitter:"


async def _wait(check: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _config(address: str, queue: str, remote: Remote, root: Path) -> Config:
    return make_config(address, queue, CARDLOOP_WORKSPACE__ENABLED="true",
                       CARDLOOP_WORKSPACE__ROOT=str(root / "workspaces"),
                       CARDLOOP_WORKSPACE__AFFINITY_TIMEOUT="3",
                       CARDLOOP_SOURCES__REPOSITORY__CLONE_URL=remote.url_template,
                       CARDLOOP_SOURCES__REPOSITORY__CACHE_DIR=str(root / "repos"))


class Machine:
    """One worker process's worth: its own disk (workspace root) and its own task queue."""

    def __init__(self, client: Client, store: Store, model: ScriptedModel, config: Config) -> None:
        self.runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
        self.worker: CardloopWorker = build_worker(client, self.runtime)
        self.task = asyncio.create_task(self.worker.run())

    async def stop(self) -> None:
        await self.worker.shutdown()
        await asyncio.gather(self.task, return_exceptions=True)


def settled(state: CardState) -> bool:
    """Done, blocked, or its last stage run failed (the card waits for a person)."""
    return state.status in ("done", "blocked") or (bool(state.history) and state.history[-1].outcome == "failed")


def _cardloop_commits(remote: Remote) -> list[str]:
    return [s for s in remote.commits(BRANCH) if s.startswith("cardloop:")]


async def test_the_stage_finishes_on_another_worker_from_the_last_checkpoint(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    remote = push_sample_repo(tmp_path / "remotes")
    model = ScriptedModel({**AGENT, "review": ["ok\n\n<promise>COMPLETE</promise>"]}).start()
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    queue = f"agent-loss-{time.monotonic_ns()}"
    config = _config(temporal_server.address, queue, remote, tmp_path / "a")
    # The first worker is `cardloop worker` in a process of its own, on its own disk.
    env = {**os.environ, **NO_SOURCES, "HOME": str(tmp_path / "home"),
           "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}",
           "CARDLOOP_TEMPORAL__ADDRESS": temporal_server.address,
           "CARDLOOP_TEMPORAL__TASK_QUEUE": queue, "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false",
           "CARDLOOP_WORKER__HEALTH_PORT": "0", "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
           "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url,
           "CARDLOOP_WORKSPACE__ENABLED": "true", "CARDLOOP_WORKSPACE__ROOT": str(tmp_path / "a" / "workspaces"),
           "CARDLOOP_WORKSPACE__AFFINITY_TIMEOUT": "3", "CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": remote.url_template,
           "CARDLOOP_SOURCES__REPOSITORY__CACHE_DIR": str(tmp_path / "a" / "repos")}
    first = subprocess.Popen([sys.executable, "-m", "cardloop.app.cli.main", "worker"], env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    second: Machine | None = None
    try:
        cards = CardService(client, store, config)
        ref = cards.import_card(small_card())
        await cards.move(ref, "coding", delivery_id="c")
        # The edit of turn 3 is checkpointed on the remote: then the worker holding the worktree is SIGKILLed.
        await _wait(lambda: remote.head(BRANCH) is not None, 90, "the first checkpoint")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        second = Machine(client, store, model, _config(temporal_server.address, queue, remote, tmp_path / "b"))
        state = await cards.wait_for(ref, settled, timeout=200)
        coding = state.history[0]
        assert coding.outcome == "completed", coding.reason
        assert [r.outcome for r in state.history] == ["completed"] * 3
        # One checkpoint commit: the second worker's worktree started from it and had nothing new to commit.
        assert len(_cardloop_commits(remote)) == 1
        assert FIXED in remote.show(BRANCH, "app/webhooks/retry.py")
        notes = [m.content for m in store.messages(ref.key) if m.author == "cardloop"]
        assert any(n.startswith("The worker that held the workspace was lost") and f"origin/{BRANCH}" in n
                   for n in notes), notes
        assert (tmp_path / "b" / "workspaces" / "worktrees").is_dir()
        await replay_all(client, client.get_workflow_handle(ref.workflow_id), "agent-worker-lost")
    finally:
        await terminate_running(client, queue)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
        if second is not None:
            await second.stop()
        model.stop()
        store.close()


async def test_the_agent_continues_after_a_temporal_restart(tmp_path: Path) -> None:
    remote = push_sample_repo(tmp_path / "remotes")
    server = TemporalDevServer(port=free_port(), ui_port=None, db_file=tmp_path / "temporal.sqlite", retention=None,
                               log_file=tmp_path / "temporal.log").start()
    model = ScriptedModel({**AGENT, "review": ["ok\n\n<promise>COMPLETE</promise>"]}).start()
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    client = await Client.connect(server.address, data_converter=pydantic_data_converter)
    machine = Machine(client, store, model, _config(server.address, "agent-restart", remote, tmp_path / "a"))
    try:
        cards = CardService(client, store, machine.runtime.config)
        ref = cards.import_card(small_card())
        await cards.move(ref, "coding", delivery_id="c")
        await _wait(lambda: model.request_count >= 2, 60, "the second coding turn")
        server.kill()
        await asyncio.sleep(1.0)
        server.start()
        state = await cards.wait_for(ref, settled, timeout=200)
        assert [r.outcome for r in state.history] == ["completed"] * 3, [r.reason for r in state.history]
        assert len(_cardloop_commits(remote)) == 1
        calls = [c.id for m in store.messages(ref.key) if m.role == "assistant" for c in m.tool_calls]
        results = [m.tool_call_id for m in store.messages(ref.key) if m.role == "tool"]
        assert sorted(calls) == sorted(results)  # every call answered once, none twice
        await replay_all(client, client.get_workflow_handle(ref.workflow_id))
    finally:
        await machine.stop()
        model.stop()
        store.close()
        server.stop()
