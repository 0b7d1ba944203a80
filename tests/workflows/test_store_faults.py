"""The store locked by another connection while a stage runs: prompt.assemble (a local
activity) times out on its last attempt, or fails on SQLite's busy timeout. Either way the
stage ends "failed" with a reason a person can act on, and its history replays: the SDK
delivers a local activity's failure in other shapes on replay than live (a bare TimeoutError
instead of ActivityError(TimeoutError)), and an ordinary failure bare in both. A short outage
while the model answers is waited out inside the attempt (activities/heartbeat.py): the stage
completes and no model call is made twice."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.worker import build_worker
from cardloop.contracts.payloads import CardState
from cardloop.store import Store
from tests.stack import TRANSCRIPT, Stack, make_config, replay_all, small_card

pytestmark = pytest.mark.timeout(180)


@contextlib.asynccontextmanager
async def stack_on(server: TemporalDevServer, db: Path, busy_ms: int, **env: str) -> AsyncIterator[Stack]:
    task_queue = f"store-{uuid.uuid4().hex[:8]}"
    config = make_config(server.address, task_queue, **env)
    store = Store.open(f"sqlite:///{db}?busy_timeout_ms={busy_ms}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    client = await Client.connect(server.address, data_converter=pydantic_data_converter)
    worker = build_worker(client, runtime)
    task = asyncio.create_task(worker.run())
    try:
        yield Stack(client, store, model, config, runtime, CardService(client, store, config), task_queue)
    finally:
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()


@contextlib.contextmanager
def write_lock(db: Path):
    """SQLite's write lock, held by another connection (as another process would)."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def stage_ended(state: CardState) -> bool:
    return bool(state.history) and state.history[-1].outcome != "running"


async def test_assembly_timing_out_on_its_last_attempt_fails_the_stage_and_replays(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    # The store waits 60 s for the lock; each assembly attempt may take 1 s: the local activity
    # times out on all 5 attempts while the prompt blob waits for the write lock.
    async with stack_on(temporal_server, db, 60_000, CARDLOOP_TEMPORAL__ASSEMBLE_TIMEOUT="1") as stack:
        ref = stack.cards.import_card(small_card("LOCK-1"))
        with write_lock(db):
            handle = await stack.cards.move(ref, "planning", delivery_id="p")
            state = await stack.wait_state(ref, stage_ended, timeout=120)
        run = state.history[-1]
        assert (run.stage, run.outcome) == ("planning", "failed")
        assert run.reason == "prompt assembly timed out (5 attempts of 1 s): the store is locked or slow"
        assert stack.model.request_count == 0
        # Live the workflow saw ActivityError(TimeoutError); replay delivers a bare TimeoutError.
        await replay_all(stack.client, handle, "assemble-timeout")


async def test_a_locked_store_fails_the_stage_saying_so_and_replays(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    # The store gives up on the lock after 0.3 s, well within the assembly timeout: each attempt
    # fails with StoreUnavailable, which reaches the workflow as a bare ApplicationError.
    async with stack_on(temporal_server, db, 300) as stack:
        ref = stack.cards.import_card(small_card("LOCK-2"))
        with write_lock(db):
            handle = await stack.cards.move(ref, "planning", delivery_id="p")
            state = await stack.wait_state(ref, stage_ended, timeout=120)
        run = state.history[-1]
        assert (run.stage, run.outcome) == ("planning", "failed")
        assert run.reason == "store unavailable: database is locked"
        await replay_all(stack.client, handle, "assemble-store-locked")
        # The lock is gone: the card's next move runs the stage to the end.
        await stack.cards.move(ref, "planning", delivery_id="p2")
        state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=120)
        assert [r.outcome for r in state.history] == ["failed", "completed", "completed", "completed", "completed"]


async def test_a_short_outage_while_the_model_answers_is_waited_out_and_billed_once(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    # Each store call gives up on the lock after 0.3 s: without patience inside the attempt, the
    # model's reply could not be recorded, the attempt failed and the model was called again.
    async with stack_on(temporal_server, db, 300, CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false") as stack:
        ref = stack.cards.import_card(small_card("LOCK-3"))
        stack.model.inject(delay=1.0)  # the first turn's answer arrives during the outage
        await stack.cards.move(ref, "planning", delivery_id="p")
        for _ in range(600):
            if stack.model.request_count >= 1:
                break
            await asyncio.sleep(0.05)
        with write_lock(db):
            await asyncio.sleep(3.0)
        state = await stack.wait_state(ref, stage_ended, timeout=120)
        assert (state.history[0].stage, state.history[0].outcome) == ("planning", "completed")
        rows = stack.store.ledger(ref.key)
        assert len(rows) == stack.model.request_count  # every call billed once, none asked twice
        assert {(r.status, r.kept, r.retry) for r in rows} == {("done", True, False)}
        assert stack.store.usage_totals(ref.key).unknown == 0
