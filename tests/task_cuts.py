"""Histories as Temporal's core writes them when a query meets a local activity's end.

To answer the query, sdk-core closes the workflow task with the activity's marker and runs the
code after the activity in a new task; replay runs that code in the first task. `split_after`
builds that history from a real one, so a test can replay every such cut (workflows/versions.py
says why our runs must survive it). Used by tests/workflows/test_versions.py and by
`replay_all` in tests/stack.py, which replays every cut of every history of this generation
(each stack test's card and stage runs).
"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

LOCAL_ACTIVITY_MARKER = "core_local_activity"
WORKFLOW_TASK = (EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
                 EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)


def _attributes(event: HistoryEvent):
    return getattr(event, event.WhichOneof("attributes"))


def patch_markers(history: WorkflowHistory) -> list[str]:
    return [e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data.decode()
            for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name == "core_patch"]


def split_points(history: WorkflowHistory) -> list[int]:
    """Indexes of local activity markers that have more commands after them in their task."""
    events = history.events
    return [i for i, e in enumerate(events[:-1])
            if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER
            and events[i + 1].event_type not in WORKFLOW_TASK
            and _attributes(events[i + 1]).DESCRIPTOR.fields_by_name.get("workflow_task_completed_event_id")]


def split_after(history: WorkflowHistory, at: int) -> WorkflowHistory:
    """The history as if the workflow task that recorded event `at` (a local activity's marker)
    had closed right after it: a new scheduled/started/completed task follows the marker, the
    task's later commands belong to the new task, and every event id after it moves by three."""
    events = [HistoryEvent.FromString(e.SerializeToString()) for e in history.events]
    closed_by = _attributes(events[at]).workflow_task_completed_event_id
    by_id = {e.event_id: e for e in events}
    completed_event = by_id[closed_by].workflow_task_completed_event_attributes
    # Signals that arrived while the task waited sit between its scheduled and started events.
    trio = [HistoryEvent.FromString(by_id[i].SerializeToString())
            for i in (completed_event.scheduled_event_id, completed_event.started_event_id, closed_by)]
    assert tuple(e.event_type for e in trio) == WORKFLOW_TASK, f"event {closed_by} closes no workflow task"
    out = events[:at + 1] + trio + events[at + 1:]
    renumbered = {e.event_id: i + 1 for i, e in enumerate(out) if not any(e is t for t in trio)}
    scheduled, started, completed = (at + 2, at + 3, at + 4)
    for i, event in enumerate(out):
        attributes = _attributes(event)
        for field in attributes.DESCRIPTOR.fields:
            if field.name.endswith("event_id") and field.type == field.TYPE_INT64:
                old = getattr(attributes, field.name)
                if old:
                    setattr(attributes, field.name, renumbered.get(old, old))
        if i > at + 3 and getattr(attributes, "workflow_task_completed_event_id", 0) == renumbered[closed_by]:
            attributes.workflow_task_completed_event_id = completed
    for event, event_id in zip(trio, (scheduled, started, completed), strict=True):
        event.event_id = event_id
        event.event_time.CopyFrom(events[at].event_time)
    trio[1].workflow_task_started_event_attributes.scheduled_event_id = scheduled
    trio[2].workflow_task_completed_event_attributes.scheduled_event_id = scheduled
    trio[2].workflow_task_completed_event_attributes.started_event_id = started
    for i, event in enumerate(out):
        if not any(event is t for t in trio):
            event.event_id = i + 1
    return WorkflowHistory(history.workflow_id, out)


def gate_marker(gate: str) -> str:
    """A patch marker's data as the core records it."""
    return json.dumps({"id": gate, "deprecated": False}, separators=(",", ":"))

