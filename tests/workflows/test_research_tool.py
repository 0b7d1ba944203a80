"""The agent's research tool in error fixing (workspace on): the model asks a question about
the logs this stage gathered, the stage workflow answers with a ResearchWorkflow child, and the
report is the call's result in the history, which the next turn sends back to the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.app.scripted_model.transcript import check_transcript
from cardloop.contracts import names
from tests.research_log import ROOT_CAUSES
from tests.sample_remote import Remote
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env
from tests.workflows.research_kit import big_log_source

__all__ = ["big_log_source"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)
ASK = {"type": "tool_use", "id": "toolu_research_1", "name": "research",
       "input": {"question": "Why did the nightly build fail?"}}


@pytest.fixture
def stack_overrides(big_log_source: None, remote: Remote, tmp_path: Path) -> dict[str, str]:
    # No automatic research: the tool is the only way the logs get researched here.
    return agent_env(remote, tmp_path, CARDLOOP_CONTEXT__SOURCES__ERROR_FIXING='["big_log"]',
                     CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE="false", CARDLOOP_RESEARCH__STAGES="[]")


async def test_the_agent_researches_the_gathered_logs_with_its_tool(stack: Stack) -> None:
    stack.model.transcript = check_transcript(
        {**AGENT, "error_fixing": [[ASK], "The database refuses connections: a person must raise max_connections."
                                          "\n\n<promise>BLOCKED</promise>"]}, "test transcript")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("FIX-2", title="The nightly build fails"))
    await stack.cards.move(ref, "error_fixing", delivery_id="fix-2")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=240)
    run = state.history[0]
    assert run.outcome == "blocked" and run.tool_calls == 1 and run.iterations == 2, run.reason
    # The report is the call's result in the history, and went back to the model.
    result = next(m for m in stack.store.messages(ref.key) if m.role == "tool")
    assert result.tool_call_id == "toolu_research_1" and not result.is_error
    for cause in ROOT_CAUSES:
        assert cause in result.content
    assert "(research over ci/run-7.log: 40 of" in result.content
    turns = [r.body for r in stack.model.requests if r.body and "# Stage: error fixing" in str(r.body.get("system"))]
    assert "research" in {t["name"] for t in turns[0]["tools"]}
    assert ROOT_CAUSES[2] in str(turns[1]["messages"])
    # The research was the stage run's child workflow; no automatic research ran before it.
    stage_id = f"{ref.workflow_id}/1-error_fixing"
    child = stack.client.get_workflow_handle(f"{stage_id}/research-1-toolu_research_1")
    assert (await child.describe()).workflow_type == names.RESEARCH_WORKFLOW
    assert not any(i.source == "cardloop:research" for i in stack.store.context_items(ref.key))
    # Its cost is the run's, as the ledger bills it under the stage.
    research = [r for r in stack.store.ledger(ref.key) if r.purpose == "research"]
    assert research and run.research_output_tokens == sum(r.output_tokens for r in research)
    assert run.cost_usd == pytest.approx(float(stack.store.usage_totals(ref.key).by_stage["error_fixing"].cost_usd))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


async def test_a_research_call_without_a_question_is_an_error_result(stack: Stack) -> None:
    empty = {**ASK, "id": "toolu_research_2", "input": {}}
    stack.model.transcript = check_transcript(
        {**AGENT, "error_fixing": [[empty], "Cannot tell.\n\n<promise>BLOCKED</promise>"]}, "test transcript")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("FIX-3"))
    await stack.cards.move(ref, "error_fixing", delivery_id="fix-3")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=240)
    assert state.history[0].outcome == "blocked"
    result = next(m for m in stack.store.messages(ref.key) if m.role == "tool")
    assert result.is_error and "give a question" in result.content


async def test_a_research_the_tool_made_that_failed_is_in_the_runs_cost(stack: Stack) -> None:
    stack.model.transcript = check_transcript(
        {**AGENT, "error_fixing": [[ASK], "I cannot tell.\n\n<promise>BLOCKED</promise>"]}, "test transcript")
    stack.model.reset()
    # Turn 1, the planner and the ten analyst batches answer; the synthesizer is refused: the research fails.
    stack.model.inject(times=12)
    stack.model.inject(status=400, message="prompt blocked by the content filter")
    ref = stack.cards.import_card(small_card("FIX-4", title="The nightly build fails"))
    await stack.cards.move(ref, "error_fixing", delivery_id="fix-4")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=240)
    run = state.history[0]
    assert run.outcome == "blocked" and run.iterations == 2, run.reason
    result = next(m for m in stack.store.messages(ref.key) if m.role == "tool")
    assert result.is_error and result.content.startswith("research failed: ")
    paid = [r for r in stack.store.ledger(ref.key) if r.purpose == "research" and r.kept and r.status == "done"]
    assert len(paid) == 11 and run.research_output_tokens == sum(r.output_tokens for r in paid)
    assert run.cost_usd == pytest.approx(float(stack.store.usage_totals(ref.key).by_stage["error_fixing"].cost_usd))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
