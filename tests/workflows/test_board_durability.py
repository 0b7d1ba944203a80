"""A board write survives losing its worker mid-write: a `cardloop worker` process is SIGKILLed
while Linear has applied its comment but not yet answered; another worker retries the activity,
finds the comment by its marker and posts nothing twice. The histories replay."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.worker import build_worker
from cardloop.integrations.board_clients.base import is_own_comment
from cardloop.store import Store
from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, board_env, serving
from tests.stack import NO_SOURCES, ROOT, make_config, replay_all, small_card, terminate_running

pytestmark = pytest.mark.timeout(180)

PLAN = ["Plan: cap the delay before the jitter.\n\n<promise>COMPLETE</promise>"]


async def test_a_worker_killed_mid_write_never_posts_twice(temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    model = ScriptedModel({"planning": PLAN}).start()
    db = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store.open(db)
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    queue = f"board-kill-{time.monotonic_ns()}"
    with serving("linear") as linear:
        # The stage's first comment is applied, then its answer never reaches the worker.
        linear.stall = re.compile(r"commentCreate")
        boards = {**board_env("linear", linear), "CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE": "false"}
        env = {**os.environ, **NO_SOURCES, **boards, "HOME": str(tmp_path / "home"),
               "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "DATABASE_URL": db,
               "CARDLOOP_TEMPORAL__ADDRESS": temporal_server.address, "CARDLOOP_TEMPORAL__TASK_QUEUE": queue,
               "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false", "CARDLOOP_WORKER__HEALTH_PORT": "0",
               "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
               "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url}
        first = subprocess.Popen([sys.executable, "-m", "cardloop.app.cli.main", "worker"], env=env, cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        config = make_config(temporal_server.address, queue, **boards)
        second = None
        try:
            cards = CardService(client, store, config)
            ref = cards.import_card(small_card(CARD_ID["linear"], board="linear"))
            await cards.move(ref, "planning", delivery_id="k-1")
            assert await asyncio.to_thread(linear.stalled.wait, 90), "the first comment never reached Linear"
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            linear.release.set()  # the answer goes to a closed connection
            assert len(linear.comments) == 1
            runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
            second = build_worker(client, runtime)
            task = asyncio.create_task(second.run())
            state = await cards.wait_for(ref, lambda s: bool(s.history), timeout=120)
            assert state.history[0].outcome == "completed"
            deadline = time.monotonic() + 30
            while len(linear.comments) < 2 and time.monotonic() < deadline:  # the outcome's comment follows
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # room for a duplicate to show up, were there one
            lines = [c.splitlines()[0] for c in linear.comments]
            assert lines == ["cardloop · planning (run 1) started: the agent is working on this card.",
                             "cardloop · planning (run 1) completed."], lines
            assert all(is_own_comment(c) for c in linear.comments)
            await replay_all(client, client.get_workflow_handle(ref.workflow_id))
        finally:
            linear.release.set()
            await terminate_running(client, queue)
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(10)
            if second is not None:
                await second.shutdown()
                await asyncio.gather(task, return_exceptions=True)
            model.stop()
            store.close()
