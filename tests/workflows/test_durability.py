"""Crashes: a worker killed in the middle of a model call, and the Temporal server restarted on
its SQLite file while a stage runs. The card completes and nothing is duplicated."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.worker import build_worker
from cardloop.store import Store
from tests.stack import NO_SOURCES, TRANSCRIPT, make_config, replay_all, small_card

pytestmark = pytest.mark.timeout(240)
CLI = Path(sys.executable).parent / "cardloop"


async def _wait(predicate, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _spawn_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(CLI), "worker"], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


async def test_worker_killed_mid_model_call_restarts_and_nothing_is_duplicated(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    model.inject(delay=8.0)  # the first model call hangs: the worker dies during it
    db = tmp_path / "store.sqlite"
    tq = f"crash-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test", "DATABASE_URL": f"sqlite:///{db}",
           "CARDLOOP_TEMPORAL__ADDRESS": temporal_server.address, "CARDLOOP_TEMPORAL__TASK_QUEUE": tq,
           "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url,
           # This test is about crashes; its client and replays use the plain converter (the codec's
           # own canary is tests/cardloop/app/test_codec_canary.py).
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false", **NO_SOURCES}
    config = make_config(temporal_server.address, tq)
    store = Store.open(f"sqlite:///{db}")
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    cards = CardService(client, store, config)
    log = tmp_path / "worker.log"
    first = _spawn_worker(env, log)
    second = None
    try:
        ref = cards.import_card(small_card("CRASH-1"))
        await cards.move(ref, "testing", delivery_id="t")
        await _wait(lambda: model.request_count >= 1, 30, "the first model call")
        os.killpg(first.pid, signal.SIGKILL)  # no clean shutdown: the activity is lost mid-call
        first.wait(10)
        second = _spawn_worker(env, log)
        state = await cards.wait_for(ref, lambda s: s.status == "done", timeout=120)
        assert state.history[0].outcome == "completed"
        assert model.request_count == 2  # the lost call was made again, once
        replies = [m for m in store.messages(ref.key) if m.role == "assistant"]
        assert len(replies) == 1
        totals = store.usage_totals(ref.key)
        # Both calls are in the ledger: the lost one without usage (its worker died), the retry kept.
        assert totals.total.calls == 2 == model.request_count
        assert (totals.unknown, totals.retries, totals.own.calls) == (1, 1, 1)
        await replay_all(client, client.get_workflow_handle(ref.workflow_id))
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
        model.stop()
        store.close()


async def test_dev_server_restarted_on_its_sqlite_file_the_card_continues(tmp_path: Path) -> None:
    port = free_port()
    server = TemporalDevServer(port=port, ui_port=None, db_file=tmp_path / "temporal.sqlite", retention=None,
                               log_file=tmp_path / "temporal.log").start()
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    model.inject(delay=4.0)  # planning's model call is in flight when the server dies
    config = make_config(server.address, "restart")
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    client = await Client.connect(server.address, data_converter=pydantic_data_converter)
    worker = build_worker(client, runtime)
    task = asyncio.create_task(worker.run())
    cards = CardService(client, store, config)
    try:
        ref = cards.import_card(small_card("RESTART-1"))
        await cards.move(ref, "planning", delivery_id="p")
        await _wait(lambda: model.request_count >= 1, 30, "the planning model call")
        server.kill()
        await asyncio.sleep(1.0)
        server.start()
        state = await cards.wait_for(ref, lambda s: s.status == "done", timeout=150)
        assert [r.stage for r in state.history] == ["planning", "coding", "review", "testing"]
        assert all(r.outcome == "completed" for r in state.history)
        replies = [m for m in store.messages(ref.key) if m.role == "assistant"]
        assert len(replies) == 5  # planning 1, coding 2, review 1, testing 1: none twice
        await replay_all(client, client.get_workflow_handle(ref.workflow_id))
    finally:
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()
        server.stop()
