"""Histories recorded by earlier versions must replay on today's workflow code: a change
that breaks determinism for running cards fails here. Record new ones with
RECORD_WORKFLOW_HISTORIES=1 pytest tests/workflows/test_card_workflow.py"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.app.worker import WORKFLOWS

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed() -> None:
    assert len(HISTORIES) >= 10


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path) -> None:
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    record = json.loads(path.read_text())
    history = WorkflowHistory.from_json(record["workflow_id"], record["history"])
    await replayer.replay_workflow(history)
