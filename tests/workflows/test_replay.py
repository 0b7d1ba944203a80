"""Histories recorded by earlier versions must replay on today's workflow code: a change
that breaks determinism for running cards fails here. Record new ones with
RECORD_WORKFLOW_HISTORIES=1 pytest tests/workflows/test_card_workflow.py"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.app.worker import WORKFLOWS
from tests.stack import HISTORIES as HISTORY_DIR
from tests.stack import portable

HISTORIES = sorted(HISTORY_DIR.glob("*.json"))


def test_histories_are_committed() -> None:
    assert len(HISTORIES) >= 10


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path) -> None:
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    record = json.loads(path.read_text())
    history = WorkflowHistory.from_json(record["workflow_id"], record["history"])
    await replayer.replay_workflow(history)


def test_recorded_histories_carry_no_machine_paths() -> None:
    # Stack traces of failed attempts named the recording machine's checkout and virtualenv.
    absolute = re.compile(r'File \\"/')
    assert [p.name for p in HISTORIES if absolute.search(p.read_text())] == []


def test_recording_strips_machine_paths() -> None:
    trace = ('  File "/home/dev/cardloop/.venv/lib/python3.12/site-packages/temporalio/worker/_activity.py", '
             'line 379\n  File "/usr/lib/python3.12/concurrent/futures/thread.py", line 58\n'
             '  File "/home/dev/cardloop/activities/llm.py", line 48')
    stripped = portable({"events": [{"lastFailure": {"stackTrace": trace, "message": "HTTP 529"}}]},
                        Path("/home/dev/cardloop"))
    assert stripped == {"events": [{"lastFailure": {"message": "HTTP 529", "stackTrace": (
        '  File "<site-packages>/temporalio/worker/_activity.py", line 379\n'
        '  File "<python>/concurrent/futures/thread.py", line 58\n  File "activities/llm.py", line 48')}}]}
