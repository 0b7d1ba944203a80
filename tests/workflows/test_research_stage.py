"""error_fixing researches a gathered log too large for its prompt: the report joins the card's
context as a research item with provenance, and the model's prompt has it. The research runs
as a child workflow of the stage run, whose activities are the fan-out."""

from __future__ import annotations

import asyncio

import pytest

from cardloop.contracts import names
from cardloop.contracts.payloads import CardRef, CardState
from cardloop.prompts.card import ContextKind
from tests.research_log import ROOT_CAUSES
from tests.stack import Stack, replay_all, small_card
from tests.workflows.research_kit import big_log_source, scheduled_activities

__all__ = ["big_log_source"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def stack_overrides(big_log_source: None) -> dict[str, str]:
    return {"CARDLOOP_CONTEXT__SOURCES__ERROR_FIXING": '["big_log"]',
            "CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE": "false"}


async def first_run(stack: Stack, card_id: str, transcript: list[str]) -> tuple[CardRef, CardState]:
    """The card's first error_fixing run (its research over the big log, then `transcript`'s turns), ended."""
    stack.model.transcript["error_fixing"] = transcript
    ref: CardRef = stack.cards.import_card(small_card(card_id, title="The nightly build fails"))
    await stack.cards.move(ref, "error_fixing", delivery_id="f1")
    return ref, await stack.wait_state(ref, lambda s: len(s.history) >= 1, timeout=240)


READS_THEN_FIXES = ["Reading the report first.", "Fixed.\n<promise>COMPLETE</promise>"]


async def test_error_fixing_researches_a_log_too_large_for_its_prompt(stack: Stack) -> None:
    ref: CardRef = stack.cards.import_card(small_card("FIX-1", title="The nightly build fails"))
    await stack.cards.move(ref, "error_fixing", delivery_id="f1")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1, timeout=240)
    assert state.history[0].outcome == "completed", state.history[0].reason
    items = {i.source: i for i in stack.store.context_items(ref.key)}
    report = items["cardloop:research"]
    assert report.kind == ContextKind.RESEARCH
    for cause in ROOT_CAUSES:
        assert cause in report.content
    assert "Research provenance:" in report.content and "Buffers: ci/run-7.log" in report.content
    assert "Chunks read (40 of" in report.content and "ci/run-7.log lines " in report.content
    # The model's error-fixing turn saw the report.
    turn = [r.body for r in stack.model.requests if r.body and "# Stage: error fixing" in str(r.body.get("system"))]
    assert turn and ROOT_CAUSES[2] in str(turn[0]["messages"])
    # The research is the stage run's child workflow; its activities are the fan-out.
    stage = stack.client.get_workflow_handle(f"{ref.workflow_id}/1-error_fixing")
    child = stack.client.get_workflow_handle(f"{ref.workflow_id}/1-error_fixing/research")
    assert (await child.describe()).workflow_type == names.RESEARCH_WORKFLOW
    acts = scheduled_activities(await child.fetch_history())
    assert acts.count(names.RESEARCH_ANALYZE) == 10
    assert any(e.HasField("start_child_workflow_execution_initiated_event_attributes")
               for e in (await stage.fetch_history()).events)
    # Billed to the card, under the stage.
    research_rows = [r for r in stack.store.ledger(ref.key) if r.purpose == "research"]
    assert len(research_rows) == 1 + 10 + 2 and {r.stage for r in research_rows} == {"error_fixing"}
    # ... and in the run's cost, which the card's state, card list and the cost budget read.
    billed = stack.store.usage_totals(ref.key).by_stage["error_fixing"]
    run = state.history[0]
    print(f"research ${sum(float(r.cost_usd) for r in research_rows):.6f}, run ${run.cost_usd:.6f}")
    assert run.cost_usd == pytest.approx(float(billed.cost_usd)) == pytest.approx(state.cost_usd)
    assert run.research_input_tokens == sum(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens
                                            for r in research_rows)
    assert run.research_output_tokens == sum(r.output_tokens for r in research_rows)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


@pytest.mark.stack_env(CARDLOOP_STAGES__ERROR_FIXING__COST_BUDGET_USD="0.05")
async def test_the_research_a_run_made_counts_against_its_cost_budget(stack: Stack) -> None:
    # The research costs about $0.10, a turn about $0.02: only with the research is $0.05 spent.
    ref, state = await first_run(stack, "FIX-BUDGET", READS_THEN_FIXES)
    run = state.history[0]
    billed = stack.store.usage_totals(ref.key).by_stage["error_fixing"]
    assert (run.outcome, run.iterations) == ("budget_exhausted", 1), run.reason
    assert run.reason.startswith(f"cost budget spent: ${run.cost_usd:.4f} of $0.0500")
    assert run.cost_usd == pytest.approx(float(billed.cost_usd))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "research-in-run-cost")


def kept_research(stack: Stack, key: str) -> list:
    return [r for r in stack.store.ledger(key) if r.purpose == "research" and r.kept and r.status == "done"]


async def test_a_research_that_fails_after_its_calls_is_in_the_runs_cost(stack: Stack) -> None:
    # The planner and the ten analyst batches answer; the synthesizer is refused (a 400, not
    # retried): the research fails, its eleven calls billed all the same.
    stack.model.transcript["error_fixing"] = ["Fixed.\n<promise>COMPLETE</promise>"]
    stack.model.inject(times=11)
    stack.model.inject(status=400, message="prompt blocked by the content filter")
    ref: CardRef = stack.cards.import_card(small_card("FIX-FAILED", title="The nightly build fails"))
    await stack.cards.move(ref, "error_fixing", delivery_id="f1")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1, timeout=240)
    run = state.history[0]
    assert run.outcome == "completed", run.reason
    assert "cardloop:research" not in {i.source for i in stack.store.context_items(ref.key)}
    paid = kept_research(stack, ref.key)
    assert len(paid) == 11
    billed = stack.store.usage_totals(ref.key).by_stage["error_fixing"]
    print(f"failed research ${sum(float(r.cost_usd) for r in paid):.6f}, run ${run.cost_usd:.6f}, "
          f"billed ${float(billed.cost_usd):.6f}")
    assert run.cost_usd == pytest.approx(float(billed.cost_usd)) == pytest.approx(state.cost_usd)
    assert run.research_input_tokens == sum(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens for r in paid)
    assert run.research_output_tokens == sum(r.output_tokens for r in paid)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "research-failed-in-run-cost")


async def test_a_stage_cancelled_while_it_researches_ends_cancelled_with_what_the_research_kept(stack: Stack) -> None:
    # The planner answers at once, the analysts take their time: `card cancel` lands meanwhile.
    stack.model.inject()
    stack.model.inject(delay=3.0, times=10)
    ref: CardRef = stack.cards.import_card(small_card("FIX-CANCEL", title="The nightly build fails"))
    await stack.cards.move(ref, "error_fixing", delivery_id="f1")
    deadline = asyncio.get_running_loop().time() + 120
    while not (kept_research(stack, ref.key)
               and any(r.status == "calling" for r in stack.store.ledger(ref.key))):
        assert asyncio.get_running_loop().time() < deadline, "the research never got to its analysts"
        await asyncio.sleep(0.05)
    run = await stack.cards.cancel(ref, actor="Priya")
    assert run.outcome == "cancelled", run.reason
    assert run.iterations == 0  # no turn ran after the cancel
    paid = kept_research(stack, ref.key)
    assert paid and run.cost_usd == pytest.approx(sum(float(r.cost_usd) for r in paid))
    assert run.research_output_tokens == sum(r.output_tokens for r in paid)
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


@pytest.mark.stack_env(CARDLOOP_STAGES__ERROR_FIXING__TOKEN_BUDGET="30000")
async def test_the_token_budget_counts_every_token_the_run_spent(stack: Stack) -> None:
    # The turns' own tokens stay well under 30,000; with its research's, the run spent more.
    ref, state = await first_run(stack, "FIX-TOKENS", READS_THEN_FIXES)
    run = state.history[0]
    rows = stack.store.ledger(ref.key)
    spent = sum(r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens for r in rows)
    print(f"turns' own {run.input_tokens + run.output_tokens:,}, research "
          f"{run.research_input_tokens + run.research_output_tokens:,}, all {spent:,}: {run.reason}")
    assert run.input_tokens + run.output_tokens < 30_000 <= spent
    assert (run.outcome, run.iterations) == ("budget_exhausted", 1), run.reason
    assert run.reason.startswith(f"token budget spent: {spent:,} of 30,000")
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "token-budget-counts-all")
