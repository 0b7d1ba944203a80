"""context.gather with a source that read some parts and failed on others (GitHub Actions: one
job's log answers 502 every time): Temporal retries the gather while attempts remain, as for a
source that fails whole; the last attempt keeps what was read, and the card's status item and
the result name what was not. The activity runs in a real worker on Temporal's dev server, with
the worker's ActivityDeps, a real SQLite store and the loopback GitHub of the sources' tests."""

from __future__ import annotations

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
from temporalio.worker import Worker

from cardloop.activities.context import ContextActivities
from cardloop.activities.deps import ActivityDeps
from cardloop.app.devserver import TemporalDevServer
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.payloads import GatherInput, GatherResult
from cardloop.prompts.card import Card, ContextKind
from cardloop.store import Store
from tests.cardloop.integrations.sources.fake_github import BRANCH, REPO, TOKEN, FakeGitHub, seed_ci, serving


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving() as fake:
        seed_ci(fake)
        yield fake


@pytest.fixture
def context(github: FakeGitHub, tmp_path: Path) -> Iterator[tuple[ContextActivities, Store]]:
    config = load_config(REPO_CONFIG, env={
        "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "no-overrides"),
        "CARDLOOP_GITHUB_TOKEN": TOKEN,
        "CARDLOOP_SOURCES__GITHUB__API_URL": f'"{github.api_url}"',
    })
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    rt = ActivityDeps.build(config, store)
    try:
        yield ContextActivities(rt), store
    finally:
        rt.close()
        store.close()


@workflow.defn(sandboxed=False)
class GatherPartial:
    """context.gather as the stage runs it: three attempts, the last one reporting instead of failing."""

    @workflow.run
    async def run(self, inp: GatherInput) -> GatherResult:
        return await workflow.execute_activity(
            "context.gather", inp, result_type=GatherResult, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=inp.max_attempts))


async def test_one_jobs_log_failing_retries_then_keeps_the_other_jobs(
        context: tuple[ContextActivities, Store], github: FakeGitHub, temporal_server: TemporalDevServer) -> None:
    activities, store = context
    key = "default/github/PAY-20"
    store.upsert_card(key, Card.model_validate({"id": "PAY-20", "title": "Fix the failing build", "repo": REPO,
                                                "branch": BRANCH}))
    github.fail(r"/actions/jobs/2002/logs$", 502, "Server Error")
    github.fail(r"/actions/jobs/2003/logs$", 410, "Gone")
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    queue = f"gather-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(4) as pool:
        async with Worker(client, task_queue=queue, workflows=[GatherPartial], activities=[activities.gather],
                          activity_executor=pool):
            result = await client.execute_workflow(
                GatherPartial.run, GatherInput(card_key=key, stage="error_fixing", source="github_actions"),
                id=f"gather-{uuid.uuid4().hex[:8]}", task_queue=queue)

    # Retried as a source failing whole would be: three attempts, each asking for the log again.
    assert len(github.requests_to(r"/actions/jobs/2002/logs$")) == 3
    # Then kept: every failed job's item, the log that downloaded, and what was not read.
    assert result.status == "ok" and result.items == 3
    assert [b.name for b in result.logs] == ["github_actions/2004.log"]
    assert len(result.missing) == 2 and "job 2002 (test (3.11)): log not read" in result.missing[0]
    assert "HTTP 502" in result.missing[0] and "job 2003 (build)" in result.missing[1]
    items = store.context_items(key)
    logs = {i.source.rsplit("/", 1)[-1]: i.content for i in items if i.kind is ContextKind.BUILD_LOG}
    assert set(logs) == {"2002", "2003", "2004"}
    assert "Log: unavailable (GitHub failed while downloading the log of job 2002" in logs["2002"]
    assert "Process completed with exit code 2." in logs["2004"]
    [status] = [i.content for i in items if i.kind is ContextKind.SOURCE_STATUS]
    assert status.startswith("GitHub Actions build logs: partial, 3 item(s) kept; not read: job 2002")
    assert "(after 3 attempts)" in status and "unavailable for this turn" not in status
