"""The worker's sandbox runner: the payload codec sees the same serialization contexts as under
Temporal's stock sandbox, workflow code is still restricted, and a changed SDK falls back to the
stock runner."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

from cardloop.app import sandbox
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.sandbox import ContextDirectSandboxRunner, workflow_runner

pytestmark = pytest.mark.timeout(120)
RESTRICTIONS = SandboxRestrictions.default.with_passthrough_all_modules()


def describe(context: SerializationContext | None) -> str:
    """A context without its run-specific ids, so two runs of the same workflow compare equal."""
    if isinstance(context, ActivitySerializationContext):
        return f"activity {context.activity_type} local={context.is_local}"
    if isinstance(context, WorkflowSerializationContext):
        return "child" if context.workflow_id.endswith("/child") else "workflow"
    return repr(context)


@dataclasses.dataclass
class RecordingCodec(PayloadCodec, WithSerializationContext):
    """Records which context each payload was encoded and decoded under; changes no payload."""

    seen: list[str]
    context: SerializationContext | None = None

    def with_context(self, context: SerializationContext) -> RecordingCodec:
        return RecordingCodec(self.seen, context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen += [f"encode {describe(self.context)}"] * len(payloads)
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen += [f"decode {describe(self.context)}"] * len(payloads)
        return list(payloads)


@activity.defn
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn
class ChildWorkflow:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_local_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class ParentWorkflow:
    @workflow.run
    async def run(self, text: str) -> list[str]:
        loud = await workflow.execute_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))
        local = await workflow.execute_local_activity(shout, text + "!", start_to_close_timeout=timedelta(seconds=10))
        child = await workflow.execute_child_workflow(ChildWorkflow.run, text + "?",
                                                      id=f"{workflow.info().workflow_id}/child")
        return [loud, local, child]


@workflow.defn
class ClockReadingWorkflow:
    @workflow.run
    async def run(self) -> str:
        return datetime.datetime.now().isoformat()  # forbidden in a workflow: the sandbox refuses it


@workflow.defn
class FileReadingWorkflow:
    @workflow.run
    async def run(self) -> str:
        with open(__file__) as f:  # forbidden in a workflow: the sandbox refuses it
            return f.read()


async def contexts_seen(server: TemporalDevServer, runner: SandboxedWorkflowRunner) -> Counter[str]:
    seen: list[str] = []
    client = await Client.connect(server.address, data_converter=DataConverter(payload_codec=RecordingCodec(seen)))
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[ParentWorkflow, ChildWorkflow], activities=[shout],
                      workflow_runner=runner):
        result = await client.execute_workflow(ParentWorkflow.run, "hi", id=f"{queue}-parent", task_queue=queue)
    assert result == ["HI", "HI!", "HI?"]
    return Counter(seen)


async def test_the_codec_sees_the_contexts_the_stock_sandbox_gives(temporal_server: TemporalDevServer) -> None:
    stock = await contexts_seen(temporal_server, SandboxedWorkflowRunner(restrictions=RESTRICTIONS))
    ours = await contexts_seen(temporal_server, ContextDirectSandboxRunner(restrictions=RESTRICTIONS))
    assert ours == stock
    # The comparison is about something: activities', local activities' and the child's payloads
    # were each encoded under their own context, not all under the workflow's.
    assert {"encode activity shout local=False", "encode activity shout local=True", "encode child"} <= set(ours)


async def refusal(server: TemporalDevServer, workflow_class: type, restrictions: SandboxRestrictions) -> str:
    """The message of the first workflow task failure of a run of `workflow_class`."""
    client = await Client.connect(server.address)
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    runner = workflow_runner(restrictions)
    async with Worker(client, task_queue=queue, workflows=[workflow_class], workflow_runner=runner):
        handle = await client.start_workflow(workflow_class.run, id=f"{queue}-run", task_queue=queue)
        failure = await first_task_failure(client, handle.id)
        await handle.terminate("test over")
    return failure


async def test_workflow_code_still_runs_under_the_sandbox_restrictions(temporal_server: TemporalDevServer) -> None:
    # The worker's own restrictions (every module passed through) still refuse the restricted
    # builtins; the stock restrictions, under the same runner, still refuse the clock. (With every
    # module passed through, the clock is refused by tests/workflows/test_determinism_guard.py.)
    assert "__builtins__.open" in await refusal(temporal_server, FileReadingWorkflow, RESTRICTIONS)
    assert "datetime.datetime.now" in await refusal(temporal_server, ClockReadingWorkflow, SandboxRestrictions.default)


async def first_task_failure(client: Client, workflow_id: str) -> str:
    for _ in range(100):
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return event.workflow_task_failed_event_attributes.failure.message
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id}: no workflow task failed")


def test_the_worker_runs_the_direct_context_runner() -> None:
    from cardloop.app.worker import WORKFLOW_RUNNER

    assert isinstance(WORKFLOW_RUNNER, ContextDirectSandboxRunner)
    assert WORKFLOW_RUNNER.restrictions.passthrough_all_modules


def test_a_changed_sdk_gets_the_stock_runner(monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    class Reworked:  # an SDK whose sandboxed instance keeps its in-sandbox instance elsewhere
        def _create_instance(self) -> None:
            self._run_code("with __temporal_importer.applied():\n  pass\n")

        def _run_code(self, code: str, **extra: Any) -> None: ...

        def get_serialization_context(self, command_info: Any) -> None: ...

        def get_external_store_context(self, command_info: Any) -> None: ...

    monkeypatch.setattr(sandbox_runner, "_Instance", Reworked)
    with caplog.at_level(logging.WARNING, logger=sandbox.__name__):
        runner = workflow_runner(RESTRICTIONS)
    assert type(runner) is SandboxedWorkflowRunner
    assert runner.restrictions is RESTRICTIONS
    assert "stock sandbox" in caplog.text
