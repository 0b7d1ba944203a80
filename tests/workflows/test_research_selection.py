"""Chunk selection end to end: a Java service's log and a Deployment's pod logs, each one error
repeated thousands of times around two rare causes, researched on a real Temporal server with
the scripted model's roles. With 8 chunks analysed of hundreds, the report must quote all four
causes: the repeats may not fill the budget (cardloop/integrations/research/selection.py)."""

from __future__ import annotations

import pytest

from tests.research_noise import JAVA_CAUSES, POD_CAUSES, java_log, pod_log
from tests.stack import Stack
from tests.workflows.research_kit import run_research

pytestmark = pytest.mark.timeout(300)


async def test_rare_causes_in_two_noisy_logs_reach_the_report(stack: Stack) -> None:
    files = [("orders-api.log", java_log(1_500_000)), ("payments-pods.log", pod_log(1_500_000))]
    result, report, _, _ = await run_research(
        stack, files, "Why is payments down? Name every root cause with its exact error message.",
        max_chunks=8, batch_chunks=4)
    assert result.chunks_total > 300 and result.chunks_analysed == 8
    for cause in (*JAVA_CAUSES, *POD_CAUSES):
        assert cause in report, cause
