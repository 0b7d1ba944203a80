"""Shared fixtures: a real token counter, an isolated environment, the machine's PostgreSQL
and a store on SQLite and PostgreSQL, the Temporal dev server and a whole stack around it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.worker import build_worker
from cardloop.prompts.tokens import TokenCounter
from cardloop.store import Store
from tests.postgres import PG_URL, fresh_schema, in_ci
from tests.repos import make_payments_repo
from tests.stack import NO_OUR_PYTEST_PLUGINS, TRANSCRIPT, Stack, make_config, terminate_running

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CARD = ROOT / "examples" / "card.json"
BUNDLED_CONFIG = (ROOT / "config.toml").read_text()


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
    # The sample repository's tests run without our own pytest plugins (tests/stack.py says why).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name, value in NO_OUR_PYTEST_PLUGINS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def config_file(tmp_path: Path) -> Callable[[str], Path]:
    """Writes a config.toml into tmp_path: `config_file(BUNDLED_CONFIG.replace(...))`."""

    def write(text: str) -> Path:
        path = tmp_path / "config.toml"
        path.write_text(text)
        return path

    return write


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    """The machine's PostgreSQL as its admin; skipped when unreachable, a failure in CI."""
    engine = create_engine(make_url(PG_URL).set(drivername="postgresql+psycopg"), connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        engine.dispose()
        reason = f"PostgreSQL at {make_url(PG_URL).render_as_string()} is unreachable: {exc.orig}"
        if in_ci():
            pytest.fail(f"{reason} (CI must test PostgreSQL)")
        pytest.skip(f"{reason}; set TEST_POSTGRES_URL or start PostgreSQL (CI=true makes this a failure)")
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL: a SQLite file, or a fresh PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.sqlite"
        return
    with fresh_schema(request.getfixturevalue("postgres_admin")) as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        yield opened


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    with TemporalDevServer(port=free_port(), ui_port=None, retention=None, log_file=log) as server:
        yield server


@pytest.fixture
def repository_env(tmp_path: Path) -> dict[str, str]:
    """Config overrides that point the repository source at a fresh git repository (file://)
    and a cache of its own, both in this test's tmp_path."""
    make_payments_repo(tmp_path / "repos")
    return {"CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": f"file://{tmp_path / 'repos'}/{{repo}}",
            "CARDLOOP_SOURCES__REPOSITORY__CACHE_DIR": str(tmp_path / "repo-cache")}


@pytest.fixture
def stack_overrides() -> dict[str, str]:
    """Config overrides for the stack that depend on other fixtures: a module overrides this
    fixture (static ones go in the stack_env marker)."""
    return {}


@pytest.fixture
def stack_db_url(tmp_path: Path) -> str:
    """The stack's store: a SQLite file of the test's own; a module overrides this fixture to run
    its stack tests on PostgreSQL (tests/cardloop/app/api/test_api_fuzz_postgres.py)."""
    return f"sqlite:///{tmp_path / 'store.sqlite'}"


@pytest.fixture
async def stack(temporal_server: TemporalDevServer, stack_db_url: str, request: pytest.FixtureRequest,
                stack_overrides: dict[str, str]) -> AsyncIterator[Stack]:
    marker = request.node.get_closest_marker("stack_env")
    env = {**(marker.kwargs if marker else {}), **stack_overrides}
    task_queue = f"test-{uuid.uuid4().hex[:8]}"
    config = make_config(temporal_server.address, task_queue, **env)
    store = Store.open(stack_db_url)
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    timeout = request.node.get_closest_marker("model_timeout")
    runtime.timeout = float(timeout.args[0]) if timeout else 5.0
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    worker = build_worker(client, runtime)
    task = asyncio.create_task(worker.run())
    try:
        yield Stack(client, store, model, config, runtime, CardService(client, store, config), task_queue)
    finally:
        await terminate_running(client, task_queue)
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stack_env(**env): config environment overrides for the stack fixture")
    config.addinivalue_line("markers", "model_timeout(seconds): the stack's model request timeout (default 5)")


# Heaviest first. Stack tests (a Temporal server, a worker, real processes) take seconds each;
# xdist hands test files out in collection order (`--no-loadscope-reorder` in the Makefile: by
# default it orders them by their number of tests, which put the few-test stack files last and
# left one worker running them alone at the end), so the quick unit files fill the end instead.
HEAVY_FIRST = ("tests/workflows/", "tests/cardloop/app/cli/", "tests/bench/", "tests/cardloop/app/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(HEAVY_FIRST) if item.nodeid.startswith(prefix)), len(HEAVY_FIRST))
    items.sort(key=rank)  # stable: each file's tests stay together and in order


# CARDLOOP_TEST_CPU=FILE: each test's CPU (its process and the children it waited for, so not
# the session's Temporal server) and wall seconds, one line each, to see where a run's time goes.
_CPU_LOG = __import__("os").environ.get("CARDLOOP_TEST_CPU")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not _CPU_LOG:
        yield
        return
    import resource
    import time

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    began, wall = cpu(), time.monotonic()
    yield
    with open(_CPU_LOG, "a") as log:
        log.write(f"{cpu() - began:.3f} {time.monotonic() - wall:.3f} {item.nodeid}\n")
