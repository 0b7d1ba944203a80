"""The stack helpers' own behaviour: a replay failure names the history's events."""

from __future__ import annotations

import json

from temporalio.client import WorkflowHistory

from tests.stack import HISTORIES, event_listing


def test_the_event_listing_names_activities_patches_signals_children_and_attributes() -> None:
    record = json.loads((HISTORIES / "board-dry-run-local-0.json").read_text())
    listing = event_listing(WorkflowHistory.from_json(record["workflow_id"], record["history"])).splitlines()
    assert listing[0] == "     1 WORKFLOW_EXECUTION_STARTED"
    assert "     2 WORKFLOW_EXECUTION_SIGNALED transition" in listing
    assert any("core_patch" in line and "card-state-in-store" in line for line in listing)
    assert any("ACTIVITY_TASK_SCHEDULED board.comment" in line for line in listing)
    assert any("START_CHILD_WORKFLOW_EXECUTION_INITIATED card/acme/github-projects/PAY-142/1-testing" in line
               for line in listing)
    assert any('CardStage="done", CardStatus="done"' in line for line in listing)
    assert len(listing) == len(record["history"]["events"])
