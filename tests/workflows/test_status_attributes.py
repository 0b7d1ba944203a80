"""What an operator filters on in the Temporal UI: the card's status and its stage runs'
outcomes as search attributes, stage runs found by CardId, a failed run listed as Failed
(while the card still records the run and offers a retry), and details that never say
"Last: " with nothing after it."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecutionStatus

from cardloop.contracts.names import SEARCH_ATTRIBUTE_TYPES
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)


async def _listed(client: Client, query: str, want: set[str], tries: int = 60) -> set[str]:
    """The workflow ids the query lists once it lists all of `want` (visibility lags a little)."""
    found: set[str] = set()
    for _ in range(tries):
        found = {wf.id async for wf in client.list_workflows(query)}
        if want <= found:
            break
        await asyncio.sleep(0.25)
    return found


def _attributes(desc) -> dict[str, object]:
    """cardloop's own attributes (Temporal adds BuildIds, TemporalChangeVersion)."""
    return {p.key.name: p.value for p in desc.typed_search_attributes if p.key.name in SEARCH_ATTRIBUTE_TYPES}


@pytest.mark.stack_env(CARDLOOP_RETRY__OVERLOAD_DEADLINE="0")
async def test_a_failed_stage_is_failed_in_the_list_and_the_card_is_filterable_by_status(stack: Stack) -> None:
    stack.model.inject(status=529)  # the first call gives up at once: the testing run fails (transient)
    ref = stack.cards.import_card(small_card("UI-FAIL-1"))
    card = await stack.cards.move(ref, "testing", delivery_id="t")
    state = await stack.wait_state(ref, lambda s: bool(s.history))
    run = state.history[0]
    # The card recorded the whole run from the failed workflow's details, not just a message.
    assert (run.outcome, run.transient, run.iterations) == ("failed", True, 1)
    assert run.reason.startswith("gave up: the model is overloaded for ")
    stage = stack.client.get_workflow_handle(f"{ref.workflow_id}/1-testing")
    desc = await stage.describe()
    assert desc.status == WorkflowExecutionStatus.FAILED
    assert _attributes(desc) == {"CardId": ref.key, "CardStage": "testing", "Tenant": "acme",
                                 "Repo": "acme/payments-api", "StageOutcome": "failed"}
    found = await _listed(stack.client, f"CardStatus = 'failed' AND CardId = '{ref.key}'", {ref.workflow_id})
    assert found == {ref.workflow_id}
    assert _attributes(await card.describe())["StageOutcome"] == "failed"
    failed_runs = await _listed(stack.client, f"StageOutcome = 'failed' AND ExecutionStatus = 'Failed' "
                                              f"AND CardId = '{ref.key}'", {stage.id})
    assert failed_runs == {stage.id}
    # Failed is still retryable: the card handled its stage's failure.
    assert await stack.cards.retry(ref) == "testing"
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [r.outcome for r in state.history] == ["failed", "completed"]
    everything = await _listed(stack.client, f"CardId = '{ref.key}'",
                               {ref.workflow_id, stage.id, f"{ref.workflow_id}/2-testing"})
    assert everything == {ref.workflow_id, stage.id, f"{ref.workflow_id}/2-testing"}
    await asyncio.wait_for(card.result(), 30)
    attrs = _attributes(await card.describe())
    assert (attrs["CardStatus"], attrs["StageOutcome"]) == ("done", "completed")
    await replay_all(stack.client, card, "status-attributes")
    # A comment on the done card opens a run that records it and closes: still "done", not "new".
    reopened = await stack.cards.say(ref, "Thanks!", delivery_id="thanks")
    await asyncio.wait_for(reopened.result(), 30)
    attrs = _attributes(await reopened.describe())
    assert (attrs["CardStatus"], attrs["StageOutcome"]) == ("done", "completed")


async def test_a_running_card_is_running_and_its_details_say_what_it_waits_for(stack: Stack) -> None:
    stack.model.inject(delay=4.0)  # the first model call is slow: no reply yet in this run
    ref = stack.cards.import_card(small_card("UI-RUN-1"))
    card = await stack.cards.move(ref, "planning", delivery_id="p")
    await stack.wait_state(ref, lambda s: s.status == "running")
    found = await _listed(stack.client, f"CardStatus = 'running' AND CardId = '{ref.key}'", {ref.workflow_id})
    assert found == {ref.workflow_id}
    meta = await card.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    last = meta.current_details.split("Last: ", 1)[1]
    assert last.startswith(f"no reply yet in this run; the stage run {ref.workflow_id}/1-planning shows")
    await replay_all(stack.client, card)
