"""Shared fixtures: a real token counter, the bundled config and templates."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.worker import build_worker
from cardloop.prompts.tokens import TokenCounter
from cardloop.store import Store
from tests.stack import TRANSCRIPT, Stack, make_config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CARD = ROOT / "examples" / "card.json"


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TokenCounter("cl100k_base")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Tests never read a developer's own overrides or config.
    for name in list(__import__("os").environ):
        if name.startswith("CARDLOOP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CARDLOOP_PATHS__PROMPT_OVERRIDES", str(tmp_path / "no-overrides"))


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    with TemporalDevServer(port=free_port(), ui_port=None, retention=None, log_file=log) as server:
        yield server


@pytest.fixture
async def stack(temporal_server: TemporalDevServer, tmp_path: Path, request: pytest.FixtureRequest,
                ) -> AsyncIterator[Stack]:
    marker = request.node.get_closest_marker("stack_env")
    env = marker.kwargs if marker else {}
    task_queue = f"test-{uuid.uuid4().hex[:8]}"
    config = make_config(temporal_server.address, task_queue, **env)
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stack_env(**env): config environment overrides for the stack fixture")
