"""The cardloop worker: CardWorkflow, StageWorkflow and the activities on the shared task queue,
plus the workspace activities on this worker's own queue (activities/workspace.py): a tool call
must run where the card's worktree is."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxRestrictions

from cardloop.activities.board import BoardActivities
from cardloop.activities.card_state import CardStateActivities
from cardloop.activities.context import ContextActivities
from cardloop.activities.deps import ActivityDeps
from cardloop.activities.history import HistoryActivities
from cardloop.activities.ledger import LedgerActivities
from cardloop.activities.llm import LlmActivities
from cardloop.activities.prompt import PromptActivities
from cardloop.activities.research import ResearchActivities
from cardloop.activities.results import ResultsActivities
from cardloop.activities.workspace import WorkspaceActivities
from cardloop.app.malloc import return_large_blocks
from cardloop.app.metrics import StageOutcomes
from cardloop.app.sandbox import workflow_runner
from cardloop.contracts.payloads import build_models
from cardloop.workflows.card import CardWorkflow
from cardloop.workflows.research import ResearchWorkflow
from cardloop.workflows.stage import StageWorkflow

logger = logging.getLogger(__name__)

WORKFLOWS: Sequence[type] = (CardWorkflow, StageWorkflow, ResearchWorkflow)


def _activities(rt: ActivityDeps, ws: WorkspaceActivities) -> tuple[list[Any], list[Any]]:
    """(the shared queue's activities, this worker's own queue's)."""
    prompt, history = PromptActivities(rt), HistoryActivities(rt)
    llm, context, state = LlmActivities(rt), ContextActivities(rt), CardStateActivities(rt)
    results, board, research = ResultsActivities(rt), BoardActivities(rt), ResearchActivities(rt)
    ledger = LedgerActivities(rt)
    shared = [prompt.stage_settings, prompt.assemble, history.append, history.summarize, llm.complete,
              context.gather, state.load, state.save, ws.open, results.pull_request, results.comment,
              results.ci_status, results.review, board.comment, board.move,
              research.buffers, research.plan, research.analyze, research.synthesize, ledger.kept]
    return shared, [ws.tool, ws.checkpoint, ws.verify]


def activities_for(rt: ActivityDeps) -> list[Any]:
    shared, own = _activities(rt, WorkspaceActivities(rt))
    return [*shared, *own]


# Every module is passed through the sandbox: modules are imported once per worker instead of once
# per workflow run (re-importing ours for every card and stage run was most of the worker's CPU per
# card, bench/orchestration.py). The price: our workflow modules see the real `datetime`, `time`
# and `random`, so the sandbox refuses only the restricted builtins (open, input) in them. What it
# no longer checks, tests/workflows/test_determinism_guard.py reads from the source, and replay of
# recorded histories checks the rest. The runner also answers the SDK's per-payload
# serialization-context lookups without an exec each (cardloop/app/sandbox.py).
WORKFLOW_RUNNER = workflow_runner(SandboxRestrictions.default.with_passthrough_all_modules())


class CardloopWorker:
    """Two Temporal workers that start, run and stop together: the shared task queue's and this
    worker's own (workspace) queue's."""

    def __init__(self, shared: Worker, own: Worker, *, sweep: Callable[[], object] | None = None,
                 sweep_every: float = 600.0) -> None:
        self.shared, self.own = shared, own
        self.sweep, self.sweep_every = sweep, sweep_every

    async def _sweeping(self) -> None:
        """Workspaces of done cards and past the age and size limits go, now and then."""
        assert self.sweep is not None
        while True:
            try:
                await asyncio.to_thread(self.sweep)
            except Exception:  # a failed sweep is retried at the next interval; the worker goes on
                logger.warning("workspace cleanup failed", exc_info=True)
            await asyncio.sleep(self.sweep_every)

    @property
    def is_running(self) -> bool:
        return self.shared.is_running and self.own.is_running

    async def run(self) -> None:
        own = asyncio.create_task(self.own.run())
        sweeping = asyncio.create_task(self._sweeping()) if self.sweep is not None else None
        try:
            await self.shared.run()
        finally:
            if sweeping is not None:
                sweeping.cancel()
            if self.own.is_running:
                await self.own.shutdown()
            await asyncio.gather(own, *([sweeping] if sweeping else []), return_exceptions=True)

    async def shutdown(self) -> None:
        await asyncio.gather(self.shared.shutdown(), self.own.shutdown() if self.own.is_running else _nothing())


async def _nothing() -> None:
    return None


def build_worker(client: Client, rt: ActivityDeps, *, task_queue: str | None = None,
                 graceful_shutdown: timedelta = timedelta(0)) -> CardloopWorker:
    """`graceful_shutdown`: how long running activities may go on after shutdown() before they are
    cancelled (`cardloop worker` uses worker.graceful_shutdown_seconds; tests and the dev stack 0)."""
    size = rt.config.temporal.max_concurrent_activities
    build_models()  # the payload models, before the first workflow task or activity needs one
    return_large_blocks()  # freed logs and prompts go back to the system: memory levels off (malloc.py)
    # In the background: the worker polls at once, and the first model call finds its client built.
    threading.Thread(target=rt.warm_providers, name="cardloop-provider-warmup", daemon=True).start()
    workspaces = WorkspaceActivities(rt)
    shared_activities, own_activities = _activities(rt, workspaces)
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=2 * size, thread_name_prefix="cardloop-activity")
    shared = Worker(
        client,
        task_queue=task_queue or rt.config.temporal.task_queue,
        workflows=list(WORKFLOWS),
        workflow_runner=WORKFLOW_RUNNER,
        activities=shared_activities,
        activity_executor=executor,
        max_concurrent_activities=size,
        max_concurrent_local_activities=size,
        graceful_shutdown_timeout=graceful_shutdown,
        interceptors=[StageOutcomes()],  # cardloop_stage_runs_total, never counted on replay
    )
    own = Worker(client, task_queue=rt.workspace_queue, activities=own_activities, activity_executor=executor,
                 max_concurrent_activities=size, graceful_shutdown_timeout=graceful_shutdown)
    ws = rt.config.workspace
    return CardloopWorker(shared, own, sweep=workspaces.sweep if ws.enabled else None,
                          sweep_every=ws.cleanup_interval_seconds)
