"""Running research on the test stack (tests/stack.py): the files as a research card, the
workflow on the stack's worker, its histories for replay and for what the UI shows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.app import research
from cardloop.contracts.config import research_settings
from cardloop.contracts.payloads import ResearchResult
from cardloop.integrations.sources import registry
from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.workflows.research import ResearchWorkflow
from tests.research_log import generate_log
from tests.stack import Stack

QUESTION = "Why did this CI run fail? Name every root cause with its exact error message."


async def run_research(stack: Stack, files: list[tuple[str, str]], question: str = QUESTION,
                       **settings: Any) -> tuple[ResearchResult, str, WorkflowHistory, str]:
    """(the result, the report, the workflow's history, the research card's key)."""
    prepared = research.prepare(stack.store, "acme", files, question)
    chosen = research_settings(stack.config).model_copy(update=settings)
    result = await research.run(stack.client, stack.task_queue, prepared, question, chosen)
    handle = stack.client.get_workflow_handle(research.workflow_id(prepared, chosen))
    history = await handle.fetch_history()
    await Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)
    biggest = max(event.ByteSize() for event in history.events)
    assert biggest < 64 * 1024, f"an event of the research workflow is {biggest:,} bytes"
    return result, stack.store.get_blob(result.report_ref, tenant="acme"), history, prepared.card_key


def scheduled_activities(history: WorkflowHistory) -> list[str]:
    """The activity types the workflow scheduled, in order: what the Temporal UI lists."""
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]


def synthesizer_requests(stack: Stack) -> list[Any]:
    return [r.body for r in stack.model.requests
            if r.body and "# Research synthesizer" in str(r.body.get("system", ""))]


LOG = generate_log(2 * 1024 * 1024)


@dataclass
class BigLogSource:
    """A context source like GitHub Actions': an excerpt item, the whole log kept as a blob."""

    name: str = "big_log"

    def gather(self, request: SourceRequest) -> SourceResult:
        head = "\n".join(LOG.split("\n")[:40])
        item = ContextItem(kind=ContextKind.BUILD_LOG, source="https://ci.example/run/7",
                           title="CI: build failed", content=f"{head}\n[... the whole log is stored as ci/run-7.log]")
        return SourceResult(source=self.name, items=(item,), blobs={"ci/run-7.log": LOG})


@pytest.fixture
def big_log_source(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    entry = registry.SourceEntry("big_log", "CI build logs", (ContextKind.BUILD_LOG,),
                                 lambda name, config: BigLogSource(), lambda card: ())
    monkeypatch.setitem(registry.SOURCES, "big_log", entry)
    yield
