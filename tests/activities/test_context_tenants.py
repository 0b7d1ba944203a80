"""context.gather under [tenants]: a card naming a repository its tenant may not read gets a
source_status item saying so (the stage goes on without it), and no request reaches GitHub;
a card of its own repository is gathered with its tenant's token.

The activity runs on Temporal's ActivityEnvironment with the worker's ActivityDeps, a real
SQLite store and the loopback GitHub of the sources' tests."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from cardloop.activities.context import REPEAT_WARNING_SECONDS, ContextActivities, RepeatedWarnings
from cardloop.activities.deps import ActivityDeps
from cardloop.app.devserver import TemporalDevServer
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.payloads import GatherInput, GatherResult
from cardloop.prompts.card import Card, ContextKind
from cardloop.store import Store
from tests.cardloop.integrations.sources.fake_github import BRANCH, REPO, FakeGitHub, seed_ci, serving

ACME_TOKEN = "ghp_AcmeTenantToken000000000000000000aaaa"
GLOBEX_TOKEN = "ghp_GlobexTenantToken0000000000000000bbbb"
SERVICE_TOKEN = "ghp_ServiceToken00000000000000000000cccc"
GLOBEX_REPO = "globex/ledger"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving() as fake:
        fake.tokens = {ACME_TOKEN, GLOBEX_TOKEN, SERVICE_TOKEN}
        fake.repos[GLOBEX_REPO] = fake.repo_json(GLOBEX_REPO)
        seed_ci(fake)
        fake.runs[GLOBEX_REPO] = [fake.run_json(GLOBEX_REPO, 1001, name="CI", workflow_id=11)]
        yield fake


@pytest.fixture
def context(github: FakeGitHub, tmp_path: Path) -> Iterator[tuple[ContextActivities, Store]]:
    config = load_config(REPO_CONFIG, env={
        "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "no-overrides"),
        "CARDLOOP_GITHUB_TOKEN": SERVICE_TOKEN,
        "CARDLOOP_SOURCES__GITHUB__API_URL": f'"{github.api_url}"',
        "CARDLOOP_TENANTS__ACME__GITHUB_TOKEN_ENV": '"ACME_GITHUB_TOKEN"',
        "CARDLOOP_TENANTS__ACME__REPOS": '["acme/*"]',
        "CARDLOOP_TENANTS__GLOBEX__GITHUB_TOKEN_ENV": '"GLOBEX_GITHUB_TOKEN"',
        "CARDLOOP_TENANTS__GLOBEX__REPOS": f'["{GLOBEX_REPO}"]',
        "ACME_GITHUB_TOKEN": ACME_TOKEN,
        "GLOBEX_GITHUB_TOKEN": GLOBEX_TOKEN,
    })
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    rt = ActivityDeps.build(config, store)
    try:
        yield ContextActivities(rt), store
    finally:
        rt.close()
        store.close()


def put_card(store: Store, key: str, repo: str) -> None:
    tenant, board, card_id = key.split("/", 2)
    store.upsert_card(key, Card.model_validate({"id": card_id, "tenant": tenant, "board": board,
                                                "title": "Fix the failing build", "repo": repo, "branch": BRANCH}))


def test_another_tenants_repository_is_reported_unavailable_and_never_requested(
        context: tuple[ContextActivities, Store], github: FakeGitHub) -> None:
    activities, store = context
    key = "acme/github/PAY-9"
    put_card(store, key, GLOBEX_REPO)

    result = ActivityEnvironment().run(activities.gather, GatherInput(card_key=key, stage="error_fixing",
                                                                      source="github_actions"))

    assert result.status == "unavailable" and result.items == 0
    assert result.reason == (f"tenant 'acme' may not read repository '{GLOBEX_REPO}' "
                             "(not in [tenants.acme] repos); nothing was fetched")
    status = [i for i in store.context_items(key) if i.kind is ContextKind.SOURCE_STATUS]
    assert len(status) == 1 and status[0].source == "cardloop:source/github_actions"
    assert "GitHub Actions build logs are unavailable for this turn: tenant 'acme' may not read" in status[0].content
    assert not any(i.kind is ContextKind.BUILD_LOG for i in store.context_items(key))
    assert github.seen == []


def test_a_tenants_own_repository_is_gathered_with_its_own_token(
        context: tuple[ContextActivities, Store], github: FakeGitHub) -> None:
    activities, store = context
    put_card(store, "globex/github/GL-1", GLOBEX_REPO)
    put_card(store, "acme/github/PAY-1", REPO)

    for key in ("globex/github/GL-1", "acme/github/PAY-1"):
        github.seen.clear()
        result = ActivityEnvironment().run(activities.gather, GatherInput(card_key=key, stage="error_fixing",
                                                                          source="github_actions"))
        assert result.status == "ok" and result.items >= 1
        token = GLOBEX_TOKEN if key.startswith("globex/") else ACME_TOKEN
        assert {s.headers.get("authorization") for s in github.seen if s.server == "api"} == {f"token {token}"}


@workflow.defn(sandboxed=False)
class GatherOnce:
    """context.gather as the stage runs it: three attempts, the last one reporting instead of failing."""

    @workflow.run
    async def run(self, inp: GatherInput) -> GatherResult:
        return await workflow.execute_activity(
            "context.gather", inp, result_type=GatherResult, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=inp.max_attempts))


async def test_a_source_that_stays_down_is_one_warning_not_a_traceback_per_attempt(
        context: tuple[ContextActivities, Store], github: FakeGitHub, temporal_server: TemporalDevServer,
        caplog: pytest.LogCaptureFixture) -> None:
    """GitHub answers 503 to every request: the first two attempts fail (Temporal retries them),
    the third records the source as unavailable. The SDK logs each failed attempt; our failures
    are BENIGN, so at DEBUG: one unreachable repository used to print a warning with a traceback
    per attempt, per turn, on `cardloop dev`'s terminal, beside our own warning saying it once."""
    activities, store = context
    key = "acme/github/PAY-10"
    put_card(store, key, REPO)
    github.fail(r"/repos/", 503, "Service Unavailable")
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    queue = f"gather-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.DEBUG)
    with ThreadPoolExecutor(4) as pool:
        async with Worker(client, task_queue=queue, workflows=[GatherOnce], activities=[activities.gather],
                          activity_executor=pool):
            result = await client.execute_workflow(
                GatherOnce.run, GatherInput(card_key=key, stage="error_fixing", source="github_actions"),
                id=f"gather-{uuid.uuid4().hex[:8]}", task_queue=queue)
    assert result.status == "unavailable" and result.reason.endswith("(after 3 attempts)")
    attempts = [r for r in caplog.records if r.getMessage().startswith("Completing activity as failed")]
    assert len(attempts) == 2 and {r.levelno for r in attempts} == {logging.DEBUG}
    assert {type(r.exc_info[1]).__name__ for r in attempts if r.exc_info} == {"ApplicationError"}
    # The SDK's adapter appends the activity's context in parentheses.
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith(f"context source github_actions unavailable for {key}: "
                                                     f"{result.reason} (")


def test_the_same_unavailable_source_is_a_warning_once_then_info(
        context: tuple[ContextActivities, Store], github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    """Every stage run gathers every source: the same reason on every run is one warning per ten
    minutes per worker (the file log keeps each at info); a different reason warns at once."""
    activities, store = context
    now = [1000.0]
    activities.warnings = RepeatedWarnings(clock=lambda: now[0])
    put_card(store, "acme/github/PAY-11", GLOBEX_REPO)
    put_card(store, "acme/github/PAY-12", "globex/other")
    caplog.set_level(logging.INFO)

    def gather(key: str) -> int:
        caplog.clear()
        ActivityEnvironment().run(activities.gather, GatherInput(card_key=key, stage="error_fixing",
                                                                 source="github_actions"))
        [record] = [r for r in caplog.records if "unavailable for" in r.getMessage()]
        return record.levelno

    assert gather("acme/github/PAY-11") == logging.WARNING
    assert gather("acme/github/PAY-11") == logging.INFO
    assert gather("acme/github/PAY-12") == logging.WARNING  # another repository: another reason
    now[0] += REPEAT_WARNING_SECONDS + 1
    assert gather("acme/github/PAY-11") == logging.WARNING
    # The card's prompt hears of it every time, whatever the log level.
    status = [i for i in store.context_items("acme/github/PAY-11") if i.kind is ContextKind.SOURCE_STATUS]
    assert len(status) == 1 and "unavailable for this turn" in status[0].content
