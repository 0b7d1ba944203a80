"""Running research from the command line (and the bench): the files as blobs of a research
card in the store, ResearchWorkflow on Temporal with a worker in this process, progress from
the workflow's query, the report read back from the store.

A CLI run is billed like a card's: its model calls are in the ledger under the research card
`<tenant>/cli/research-<digest>` (the digest of the question and the files' contents), so the
same question over the same files is one card. The workflow runs on the configured task queue:
this process's worker takes it, and so may a `cardloop dev` worker on the same Temporal."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.worker import Worker

from cardloop.activities.deps import ActivityDeps
from cardloop.contracts import names
from cardloop.contracts.payloads import NamedBlob, ResearchInput, ResearchProgress, ResearchResult, ResearchSettings
from cardloop.prompts.card import Card
from cardloop.prompts.scrub import redact_text
from cardloop.store import Store, card_key_for


@dataclass(frozen=True)
class Prepared:
    card_key: str
    workflow_id: str
    blobs: list[NamedBlob]


def prepare(store: Store, tenant: str, artifacts: Sequence[tuple[str, str]], question: str) -> Prepared:
    """The research card and the artifacts as blobs (redacted on the way in)."""
    question = redact_text(question)
    digest = hashlib.sha256(question.encode())
    for name, text in artifacts:
        digest.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(text.encode()).digest())
    card = Card(id=f"research-{digest.hexdigest()[:16]}", tenant=tenant, board="cli",
                title=f"research: {question[:200]}", body=question)
    key = card_key_for(card)
    store.upsert_card(key, card)
    names_seen: dict[str, int] = {}
    blobs = []
    for name, text in artifacts:
        n = names_seen[name] = names_seen.get(name, 0) + 1
        label = name if n == 1 else f"{name} ({n})"
        blobs.append(NamedBlob(name=label, ref=store.put_blob(tenant, text, "research"), tokens=len(text) // 4))
    return Prepared(key, f"research/{key}", blobs)


async def run(client: Client, task_queue: str, prepared: Prepared, question: str, settings: ResearchSettings,
              on_progress: Callable[[ResearchProgress], None] | None = None, poll: float = 0.5) -> ResearchResult:
    """Start (or join) the research workflow and wait for it, reporting progress.

    The workflow id names the card and the settings (models, bounds): the same research again
    is the same id, so its stored model replies are reused (nothing is billed twice), and a run
    still going (a CLI that was interrupted) is joined instead of started twice."""
    wid = workflow_id(prepared, settings)
    question = redact_text(question)  # a secret pasted into the question stays out of histories and prompts
    try:
        handle = await client.start_workflow(
            names.RESEARCH_WORKFLOW,
            ResearchInput(card_key=prepared.card_key, question=question, blobs=prepared.blobs, settings=settings,
                          stage="research"),
            id=wid, task_queue=task_queue, id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            result_type=ResearchResult)
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle(wid, result_type=ResearchResult)
    result_task = asyncio.ensure_future(handle.result())
    while not result_task.done():
        await asyncio.wait({result_task}, timeout=poll)
        if on_progress is not None and not result_task.done():
            # Progress is advisory: a query that times out must not end the run.
            with contextlib.suppress(Exception):
                on_progress(await handle.query(names.QUERY_PROGRESS, result_type=ResearchProgress))
    try:
        result = result_task.result()
    except WorkflowFailureError as err:
        cause = err.cause
        while getattr(cause, "cause", None) is not None:
            cause = cause.cause
        raise ResearchFailed(str(getattr(cause, "message", None) or cause or err)) from None
    if on_progress is not None:
        on_progress(ResearchProgress(phase="done", batches_total=result.batches, batches_done=result.batches,
                                     batches_skipped=result.batches_skipped, chunks_total=result.chunks_total,
                                     input_tokens=result.input_tokens, output_tokens=result.output_tokens))
    return result


def workflow_id(prepared: Prepared, settings: ResearchSettings) -> str:
    """The research card's workflow for these settings (models and bounds)."""
    return f"{prepared.workflow_id}/{hashlib.sha256(settings.model_dump_json().encode()).hexdigest()[:8]}"


class ResearchFailed(RuntimeError):
    """The research workflow failed: its root cause's message."""


def worker(client: Client, runtime: ActivityDeps, task_queue: str) -> Worker:
    """A worker for research alone: ResearchWorkflow and its activities on `task_queue`."""
    from cardloop.activities.research import ResearchActivities
    from cardloop.app.malloc import return_large_blocks
    from cardloop.app.worker import WORKFLOW_RUNNER
    from cardloop.contracts.payloads import build_models
    from cardloop.workflows.research import ResearchWorkflow

    build_models()  # before its activity threads first need one (payloads.py)
    return_large_blocks()  # it reads logs of many MB (malloc.py)
    acts = ResearchActivities(runtime)
    return Worker(client, task_queue=task_queue, workflows=[ResearchWorkflow], workflow_runner=WORKFLOW_RUNNER,
                  activities=[acts.buffers, acts.plan, acts.analyze, acts.synthesize],
                  activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=16),
                  max_concurrent_activities=16)
