"""Research survives losing its worker mid-run: a real `cardloop worker` process is SIGKILLed
while an analyst's model call is in flight (two batches already done), and a second worker
finishes the run. Nothing is lost and nothing stored is paid for twice: the batches that were
done are not called again, the interrupted one is called once more (its first attempt stays in
the ledger as "calling", billed by the provider with usage unknown), and the report has the
shape of an uninterrupted run's. The history replays."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.activities.deps import ActivityDeps
from cardloop.app import research
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.worker import build_worker
from cardloop.contracts import names
from cardloop.contracts.config import research_settings
from cardloop.contracts.payloads import ResearchInput, ResearchResult
from cardloop.store import Store
from cardloop.workflows.research import ResearchWorkflow
from tests.research_log import ROOT_CAUSES, generate_log
from tests.stack import NO_BOARD_WRITES, NO_SOURCES, ROOT, make_config, terminate_running

pytestmark = pytest.mark.timeout(240)

QUESTION = "Why did this CI run fail? Name every root cause with its exact error message."
LOG = generate_log(300_000)
DONE_BEFORE_KILL = 2  # analyst batches answered before the worker dies


def analyst_requests(model: ScriptedModel) -> int:
    return sum(1 for r in model.requests if r.body and "# Research analyst" in str(r.body.get("system", "")))


async def wait_until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_worker_killed_mid_analysis_loses_nothing_and_pays_nothing_twice(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    model = ScriptedModel().start()
    db = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store.open(db)
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    queue = f"research-kill-{time.monotonic_ns()}"
    config = make_config(temporal_server.address, queue)
    # One analyst at a time, so "two batches done, the third in flight" is a state the test can reach.
    settings = research_settings(config).model_copy(update={"max_chunks": 16, "batch_chunks": 4, "concurrency": 1})
    # The planner and the first analyst batches are answered; the next answer stalls until the
    # model stops (the SIGKILLed worker never reads it). inject() without a status answers normally.
    model.inject(times=1 + DONE_BEFORE_KILL)
    model.inject(delay=600)
    env = {**os.environ, **NO_SOURCES, **NO_BOARD_WRITES, "HOME": str(tmp_path / "home"),
           "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "DATABASE_URL": db,
           "CARDLOOP_TEMPORAL__ADDRESS": temporal_server.address, "CARDLOOP_TEMPORAL__TASK_QUEUE": queue,
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false", "CARDLOOP_WORKER__HEALTH_PORT": "0",
           "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
           "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url}
    first = subprocess.Popen([sys.executable, "-m", "cardloop.app.cli.main", "worker"], env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    second = task = None
    try:
        prepared = research.prepare(store, "acme", [("ci.log", LOG)], QUESTION)
        wid = research.workflow_id(prepared, settings)
        handle = await client.start_workflow(
            names.RESEARCH_WORKFLOW,
            ResearchInput(card_key=prepared.card_key, question=QUESTION, blobs=prepared.blobs, settings=settings,
                          stage="research"),
            id=wid, task_queue=queue, result_type=ResearchResult)
        await wait_until(lambda: analyst_requests(model) == DONE_BEFORE_KILL + 1 and not model.pending_faults, 90,
                         "the stalled analyst call never reached the model")
        done_before = {k for k in (f"{wid}/batch-{n}/result" for n in range(4)) if store.effect(prepared.card_key, k)}
        assert done_before == {f"{wid}/batch-{n}/result" for n in range(DONE_BEFORE_KILL)}
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)

        runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
        second = build_worker(client, runtime)
        task = asyncio.create_task(second.run())
        result = await asyncio.wait_for(handle.result(), 150)  # the heartbeat timeout (15 s) frees the batch
        report = store.get_blob(result.report_ref, tenant="acme")

        # Nothing lost: every batch analysed, none skipped, the same figures as a run never interrupted.
        batches = settings.max_chunks // settings.batch_chunks
        assert (result.batches, result.batches_skipped, result.analyst_calls) == (batches, 0, batches)
        assert result.chunks_analysed == settings.max_chunks
        assert all(store.effect(prepared.card_key, f"{wid}/batch-{n}/findings") for n in range(batches))
        for cause in ROOT_CAUSES:
            assert cause in report, cause

        # The ledger: each call key has exactly one stored ("done", kept) reply; the only other row
        # is the killed attempt of the interrupted batch, left "calling".
        ledger = store.ledger(prepared.card_key)
        done = Counter(r.call_key for r in ledger if r.status == "done")
        assert set(done.values()) == {1}, done
        assert all(r.kept for r in ledger if r.status == "done")
        cut = f"{wid}/batch-{DONE_BEFORE_KILL}/a1"
        assert [(r.call_key, r.attempt, r.status, r.kept) for r in ledger if r.status != "done"] == \
               [(cut, 1, "calling", False)]
        assert [r.attempt for r in ledger if r.call_key == cut] == [1, 2]
        # The model saw each batch once, the interrupted one twice (the killed call and its retry).
        assert analyst_requests(model) == batches + 1

        history = await handle.fetch_history()
        await Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)

        # The same research never interrupted (another tenant: another card and workflow) has the same shape.
        ref_prepared = research.prepare(store, "zenith", [("ci.log", LOG)], QUESTION)
        ref = await research.run(client, queue, ref_prepared, QUESTION, settings)
        ref_report = store.get_blob(ref.report_ref, tenant="zenith")
        assert (ref.batches, ref.analyst_calls, ref.chunks_analysed, sorted(ref.chunks_read)) == \
               (result.batches, result.analyst_calls, result.chunks_analysed, sorted(result.chunks_read))
        assert [ln for ln in ref_report.splitlines() if ln.startswith("#")] == \
               [ln for ln in report.splitlines() if ln.startswith("#")]
    finally:
        await terminate_running(client, queue)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
        if second is not None:
            await second.shutdown()
            await asyncio.gather(task, return_exceptions=True)  # type: ignore[arg-type]
        model.stop()
        store.close()
