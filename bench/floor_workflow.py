"""The bare engine's floor for bench/orchestration.py: one workflow running one activity that
sleeps the model's latency, with the SDK's defaults (sandboxed workflow, pydantic converter).

A module of its own because the workflow sandbox re-imports a workflow's module by name,
which a script run as __main__ cannot offer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.sleep")
async def bare_sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


@workflow.defn(name="BenchBare")
class BareWorkflow:
    @workflow.run
    async def run(self, seconds: float) -> str:
        return await workflow.execute_activity(bare_sleep, seconds, start_to_close_timeout=timedelta(seconds=60))
