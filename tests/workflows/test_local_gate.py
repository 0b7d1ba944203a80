"""workflows/local_gate.py on a real worker: two coroutines' local activities run one after the
other through the gate (without it they overlap: loop in, lane in, ...), and the run replays."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

from cardloop.app.devserver import TemporalDevServer
from cardloop.workflows.local_gate import LocalGate

pytestmark = pytest.mark.timeout(120)


@activity.defn(name="slow_read")
async def slow_read(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"read after {seconds}"


@workflow.defn(name="TwoLocals", sandboxed=False)
class TwoLocals:
    """Two coroutines each run a local activity through one gate: they never overlap."""

    def __init__(self) -> None:
        self.gate = LocalGate()
        self.spans: list[tuple[str, str]] = []

    async def one(self, who: str) -> None:
        async def call() -> str:
            self.spans.append((who, "in"))
            out = await workflow.execute_local_activity(slow_read, 0.3, start_to_close_timeout=timedelta(seconds=10))
            self.spans.append((who, "out"))
            return out
        await self.gate.local(who, call)

    @workflow.run
    async def run(self) -> list[tuple[str, str]]:
        await asyncio.gather(self.one("loop"), self.one("lane"))
        return self.spans


async def test_two_coroutines_local_activities_never_overlap(temporal_server: TemporalDevServer) -> None:
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    queue = f"gate-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[TwoLocals], activities=[slow_read]):
        handle = await client.start_workflow(TwoLocals.run, id=f"two-{queue}", task_queue=queue)
        spans = await handle.result()
        assert [list(s) for s in spans] == [["loop", "in"], ["loop", "out"], ["lane", "in"], ["lane", "out"]]
        replayer = Replayer(workflows=[TwoLocals], data_converter=pydantic_data_converter)
        await replayer.replay_workflow(await handle.fetch_history())
