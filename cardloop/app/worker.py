"""The cardloop worker: CardWorkflow, StageWorkflow and the activities on one task queue."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from cardloop.activities.card_state import CardStateActivities
from cardloop.activities.context import ContextActivities
from cardloop.activities.deps import ActivityDeps
from cardloop.activities.history import HistoryActivities
from cardloop.activities.llm import LlmActivities
from cardloop.activities.prompt import PromptActivities
from cardloop.workflows.card import CardWorkflow
from cardloop.workflows.stage import StageWorkflow

WORKFLOWS: Sequence[type] = (CardWorkflow, StageWorkflow)


def activities_for(rt: ActivityDeps) -> list[Any]:
    prompt, history = PromptActivities(rt), HistoryActivities(rt)
    llm, context, state = LlmActivities(rt), ContextActivities(rt), CardStateActivities(rt)
    return [prompt.stage_settings, prompt.assemble, history.append, history.summarize, llm.complete, context.gather,
            state.load, state.save]


# The sandbox still guards determinism (no clock, randomness or I/O inside a workflow), but
# modules are imported once per worker instead of once per workflow run: our workflow modules
# have no import-time side effects and pass their imports through already, and re-importing
# them for every card and stage run was most of the worker's CPU per card (bench/orchestration.py).
WORKFLOW_RUNNER = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_all_modules())


def build_worker(client: Client, rt: ActivityDeps, *, task_queue: str | None = None,
                 graceful_shutdown: timedelta = timedelta(0)) -> Worker:
    """`graceful_shutdown`: how long running activities may go on after shutdown() before they are
    cancelled (`cardloop worker` uses worker.graceful_shutdown_seconds; tests and the dev stack 0)."""
    size = rt.config.temporal.max_concurrent_activities
    return Worker(
        client,
        task_queue=task_queue or rt.config.temporal.task_queue,
        workflows=list(WORKFLOWS),
        workflow_runner=WORKFLOW_RUNNER,
        activities=activities_for(rt),
        activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=size,
                                                                thread_name_prefix="cardloop-activity"),
        max_concurrent_activities=size,
        max_concurrent_local_activities=size,
        graceful_shutdown_timeout=graceful_shutdown,
    )
