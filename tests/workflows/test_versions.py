"""Patches are decided at a run's start (workflows/versions.py), so a history replays however
its workflow tasks were cut.

A query that meets a finishing local activity makes Temporal's core close the workflow task
with the activity's marker and run the code after it in a new task; replay runs that code in
the first task. `split_after` builds exactly that history from a real one (a new workflow task
right after a local activity's marker), and every such cut of a card's histories must replay.
Before patches were decided at the start, the first such cut failed: "Non-deprecated patch
marker encountered for change status-search-attributes" (tests/workflows/histories keep
runs of that shape that did not meet a query, and still replay).
"""

from __future__ import annotations

import ast
import json

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.app.worker import WORKFLOWS
from cardloop.workflows import versions
from tests.conftest import ROOT
from tests.stack import HISTORIES as HISTORY_DIR
from tests.stack import Stack, event_listing, replay_all, small_card
from tests.task_cuts import LOCAL_ACTIVITY_MARKER, gate_marker, patch_markers, split_after, split_points


@pytest.mark.stack_env(CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_every_cut_after_a_local_activity_replays(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("CUT-1"))
    await stack.cards.move(ref, "testing")
    await stack.wait_state(ref, lambda s: len(s.history) == 1 and s.status != "running")
    # The card's run closes; a move opens the next one, which loads its state (a local activity)
    # and publishes its status right after.
    await stack.cards.move(ref, "done")
    await stack.wait_state(ref, lambda s: s.status == "done")
    first = await stack.client.get_workflow_handle(ref.workflow_id).fetch_history()
    await stack.cards.move(ref, "testing")
    state = await stack.wait_state(ref, lambda s: len(s.history) == 2 and s.status != "running")
    # Recorded (RECORD_WORKFLOW_HISTORIES=1): runs of this generation must keep replaying.
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "patches-at-start")
    histories = [first, await stack.client.get_workflow_handle(ref.workflow_id).fetch_history()] + [
        await stack.client.get_workflow_handle(f"{ref.workflow_id}/{run.run}-{run.stage}").fetch_history()
        for run in state.history]
    # A run of this code records one patch marker, the newest generation's gate, and no other.
    for history in histories:
        assert patch_markers(history) == [gate_marker(versions.GENERATIONS[-1][0])], history.workflow_id
    # replay_all replayed every cut of the card's last run and its stage runs; the first run's
    # cuts are replayed here.
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    for at in split_points(first):
        cut = split_after(first, at)
        result = await replayer.replay_workflow(cut, raise_on_replay_failure=False)
        assert result.replay_failure is None, \
            f"{first.workflow_id} cut after event {at + 1}: {result.replay_failure}\n{event_listing(cut)}"
    # The card's runs each cut after loading their state and after their stage's settings; the
    # stage runs after assembling their prompt.
    cuts = sum(len(split_points(history)) for history in histories)
    assert cuts >= 5, cuts


def _recorded_with_gates() -> list[WorkflowHistory]:
    histories = []
    for path in sorted(HISTORY_DIR.glob("*.json")):
        record = json.loads(path.read_text())
        history = WorkflowHistory.from_json(record["workflow_id"], record["history"])
        if patch_markers(history)[:1] in ([gate_marker(gate)] for gate, _ in versions.GENERATIONS):
            histories.append(history)
    return histories


async def test_recorded_runs_of_this_generation_replay_however_cut() -> None:
    """The same for the histories recorded under tests/workflows/histories by this generation:
    a later change to the workflows must keep every cut of them replaying too."""
    histories = _recorded_with_gates()
    assert len(histories) >= 3
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    for history in histories:
        for at in split_points(history):
            result = await replayer.replay_workflow(split_after(history, at), raise_on_replay_failure=False)
            assert result.replay_failure is None, f"{history.workflow_id} cut after event {at + 1}"


def test_a_cut_moves_the_tasks_commands_and_renumbers() -> None:
    """split_after on a small real-shaped history: ids stay consecutive, references follow."""
    def event(kind: str, **attributes: object) -> HistoryEvent:
        e = HistoryEvent(event_type=getattr(EventType, f"EVENT_TYPE_{kind.upper()}"))
        getattr(e, f"{kind}_event_attributes").SetInParent()
        for name, value in attributes.items():
            setattr(getattr(e, f"{kind}_event_attributes"), name, value)
        return e
    # A signal that arrived while the first task waited sits between its scheduled and started.
    events = [event("workflow_execution_started"), event("workflow_task_scheduled"),
              event("workflow_execution_signaled", signal_name="transition"),
              event("workflow_task_started", scheduled_event_id=2),
              event("workflow_task_completed", scheduled_event_id=2, started_event_id=4),
              event("marker_recorded", marker_name=LOCAL_ACTIVITY_MARKER, workflow_task_completed_event_id=5),
              event("activity_task_scheduled", workflow_task_completed_event_id=5),
              event("activity_task_started", scheduled_event_id=7),
              event("activity_task_completed", scheduled_event_id=7, started_event_id=8)]
    for i, e in enumerate(events):
        e.event_id = i + 1
    history = WorkflowHistory("w", events)
    assert split_points(history) == [5]
    cut = split_after(history, 5)
    kinds = [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in cut.events]
    assert kinds[5:9] == ["MARKER_RECORDED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
                          "WORKFLOW_TASK_COMPLETED"]
    assert kinds.count("WORKFLOW_EXECUTION_SIGNALED") == 1
    assert [e.event_id for e in cut.events] == list(range(1, 13))
    assert cut.events[7].workflow_task_started_event_attributes.scheduled_event_id == 7
    assert cut.events[8].workflow_task_completed_event_attributes.scheduled_event_id == 7
    assert cut.events[8].workflow_task_completed_event_attributes.started_event_id == 8
    assert cut.events[9].activity_task_scheduled_event_attributes.workflow_task_completed_event_id == 9
    assert cut.events[5].marker_recorded_event_attributes.workflow_task_completed_event_id == 5
    assert cut.events[11].activity_task_completed_event_attributes.scheduled_event_id == 10
    assert cut.events[11].activity_task_completed_event_attributes.started_event_id == 11


# --- only versions.py asks Temporal for patches, and every run decides them first ---------

def patch_violations(source: str, name: str = "<source>") -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if owner == "workflow" and node.func.attr in ("patched", "deprecate_patch"):
                found.append(f"{name}:{node.lineno} calls workflow.{node.func.attr} (use versions.patched)")
            elif owner == "versions" and node.func.attr in ("patched", "decided"):
                arg = node.args[0] if node.args else None
                patch = getattr(versions, arg.attr, None) if isinstance(arg, ast.Attribute) else None
                known = set().union(*(ids for _, ids in versions.GENERATIONS), versions.SUPERSEDED)
                if patch not in known:
                    found.append(f"{name}:{node.lineno} asks for {ast.unparse(arg) if arg else 'nothing'}, "
                                 "in no generation of versions.GENERATIONS")
        if isinstance(node, ast.AsyncFunctionDef) and any(ast.unparse(d).endswith("workflow.run")
                                                          for d in node.decorator_list):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                first = node.body[1]  # a docstring
            if ast.unparse(first) != "versions.decide_at_start()":
                found.append(f"{name}:{node.lineno} {node.name} does not decide its patches first")
    return found


def test_patches_are_decided_only_through_versions() -> None:
    found = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        if path.name != "versions.py":
            found += patch_violations(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)
    used = set()
    for path in (ROOT / "workflows").glob("*.py"):
        used |= {node.attr for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "versions"
                 and node.attr.isupper()}
    declared = set().union(*(ids for _, ids in versions.GENERATIONS), versions.SUPERSEDED)
    assert {getattr(versions, name) for name in used} == declared, "a declared patch no workflow asks for"


@pytest.mark.parametrize(("source", "named"), [
    ("if workflow.patched('x'):\n    pass\n", "calls workflow.patched"),
    ("workflow.deprecate_patch('x')\n", "calls workflow.deprecate_patch"),
    ("if versions.patched(versions.NOT_A_PATCH):\n    pass\n", "in no generation"),
    ("if versions.patched('status-search-attributes'):\n    pass\n", "in no generation"),
    ("@workflow.run\nasync def run(self, x):\n    await y()\n    versions.decide_at_start()\n",
     "does not decide its patches first"),
])
def test_the_patch_guard_names_each_violation(source: str, named: str) -> None:
    assert any(named in v for v in patch_violations(source)), patch_violations(source)


def test_a_run_that_decides_first_passes() -> None:
    source = ('@workflow.run\nasync def run(self, x):\n    """Doc."""\n    versions.decide_at_start()\n'
              '    if versions.patched(versions.STATUS_ATTRIBUTES):\n        pass\n')
    assert patch_violations(source) == []

