from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from cardloop.contracts import names
from cardloop.contracts.payloads import CardRef, CardState
from cardloop.prompts.card import Message
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)
# The overload schedule's waits (5 s, then 10 s) are not what these tests are about.
QUICK_RETRIES = {"CARDLOOP_RETRY__OVERLOAD_INITIAL": "0.2s", "CARDLOOP_RETRY__OVERLOAD_MAX_INTERVAL": "0.4s"}


async def test_card_crosses_every_stage_to_done(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card())
    handle = await stack.cards.move(ref, "planning", delivery_id="d-1")
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=90)
    assert [r.stage for r in state.history] == ["planning", "coding", "review", "testing"]
    assert all(r.outcome == "completed" for r in state.history)
    assert state.cost_usd > 0 and state.input_tokens > 0
    assert state.history[1].iterations == 2  # the scripted coding stage needs two turns
    # Every reply is in the store, once; usage is recorded per stage.
    replies = [m for m in stack.store.messages(ref.key) if m.role == "assistant"]
    assert len(replies) == 5
    totals = stack.store.usage_totals(ref.key)
    assert set(totals.by_stage) == {"planning", "coding", "review", "testing"}
    assert totals.total.calls == 5
    await asyncio.wait_for(handle.result(), 30)  # "done" is set before the run saves its state and closes
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED
    attrs = {k.name: v for k, v in ((p.key, p.value) for p in desc.typed_search_attributes)}
    assert attrs["CardStage"] == "done" and attrs["Repo"] == "acme/payments-api" and attrs["Tenant"] == "acme"
    await replay_all(stack.client, handle, "crosses-every-stage")


async def test_operator_can_find_cards_of_a_repo_in_error_fixing(stack: Stack) -> None:
    stack.model.inject(delay=3.0)  # keep the stage running while we search
    ref = stack.cards.import_card(small_card("PAY-7"))
    await stack.cards.move(ref, "error_fixing", delivery_id="d-7")
    await stack.wait_state(ref, lambda s: s.status == "running")
    query = "Repo = 'acme/payments-api' AND CardStage = 'error_fixing'"
    found: list[str] = []
    for _ in range(40):
        found = [wf.id async for wf in stack.client.list_workflows(query)]
        if ref.workflow_id in found:
            break
        await asyncio.sleep(0.25)
    assert ref.workflow_id in found
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))  # a card mid-stage


async def test_duplicate_transition_is_applied_once(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("PAY-2"))
    for _ in range(3):
        await stack.cards.move(ref, "review", delivery_id="same-delivery")
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [r.stage for r in state.history] == ["review", "testing"]
    assert state.seen_deliveries.count("same-delivery") == 1
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "duplicate-transition")

async def test_transition_while_a_stage_runs_cancels_it_and_keeps_its_work(stack: Stack) -> None:
    stack.model.inject(delay=0.1)  # planning turn 1 answers (work to keep) ...
    stack.model.inject(delay=5.0)  # ... and turn 2 is still waiting for the model when the card moves
    ref = stack.cards.import_card(small_card("PAY-3"))
    stack.model.transcript["planning"] = ["Still planning, no promise yet."]
    await stack.cards.move(ref, "planning", delivery_id="p")
    await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
    while not any(m.role == "assistant" for m in stack.store.messages(ref.key)):
        await asyncio.sleep(0.1)
    await stack.cards.move(ref, "testing", delivery_id="t")
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert state.history[0].stage == "planning" and state.history[0].outcome == "cancelled"
    assert state.history[1].stage == "testing" and state.history[1].outcome == "completed"
    assert any("Still planning" in m.content for m in stack.store.messages(ref.key))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "transition-cancels-stage")

async def test_comment_joins_the_history_and_unblocks_a_blocked_card(stack: Stack) -> None:
    stack.model.transcript["review"] = [
        "I need to know which retry cap applies.\n<promise>BLOCKED</promise> Which cap: 30s or 60s?",
        "Cap is 30s as you said.\n<promise>COMPLETE</promise>",
    ]
    ref = stack.cards.import_card(small_card("PAY-4"))
    await stack.cards.move(ref, "review", delivery_id="r")
    state = await stack.wait_state(ref, lambda s: s.status == "blocked")
    assert state.blocked_reason == "Which cap: 30s or 60s?"
    await stack.cards.say(ref, "Use 30 seconds.", author="priya", delivery_id="c-1")
    await stack.cards.say(ref, "Use 30 seconds.", author="priya", delivery_id="c-1")  # redelivery
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    comments = [m for m in stack.store.messages(ref.key) if m.content == "Use 30 seconds."]
    assert len(comments) == 1 and comments[0].author == "priya"
    assert [r.outcome for r in state.history][:2] == ["blocked", "completed"]
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "blocked-then-comment")

@pytest.mark.stack_env(**QUICK_RETRIES)
async def test_provider_529_then_success_retries_without_duplicates(stack: Stack) -> None:
    stack.model.inject(status=529, times=2)
    ref = stack.cards.import_card(small_card("PAY-5"))
    await stack.cards.move(ref, "testing", delivery_id="t5")
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=90)
    assert state.history[0].outcome == "completed"
    assert len([m for m in stack.store.messages(ref.key) if m.role == "assistant"]) == 1
    totals = stack.store.usage_totals(ref.key)
    # Every call is in the ledger (the two 529s as failed, without usage); one reply was kept.
    assert totals.total.calls == 3 == stack.model.request_count
    assert totals.own.calls == 1 and totals.total.cost_usd == totals.own.cost_usd
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "provider-529-retry")

async def test_provider_400_fails_the_stage_fast_with_the_message(stack: Stack) -> None:
    stack.model.inject(status=400, message="max_tokens: too large for this model")
    ref = stack.cards.import_card(small_card("PAY-6"))
    await stack.cards.move(ref, "planning", delivery_id="p6")
    state = await stack.wait_state(ref, lambda s: bool(s.history))
    assert state.history[0].outcome == "failed"
    assert "max_tokens: too large" in state.history[0].reason
    assert stack.model.request_count == 1  # no retry of a 400
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "provider-400-fails")

async def test_unknown_card_is_refused_before_anything_starts(stack: Stack) -> None:
    from cardloop.contracts.errors import InputError

    with pytest.raises(InputError, match="not known"):
        await stack.cards.move(CardRef(tenant="acme", board="github", card_id="NOPE"), "coding")


async def test_long_history_is_summarized_once_and_cached(stack: Stack) -> None:
    history = [Message(role="user" if i % 2 == 0 else "assistant",
                       content=f"Message {i}: " + "details about retries and backoff " * 60)
               for i in range(120)]
    ref = stack.cards.import_card(small_card("PAY-8", history=[m.model_dump() for m in history]))
    stack.model.transcript["coding"] = ["Working on it.", "Done.\n<promise>COMPLETE</promise>"]
    await stack.cards.move(ref, "coding", delivery_id="c8")
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=120)
    summaries = [r for r in stack.model.requests
                 if r.body and str(r.body.get("system", ""))[:200].find("# Summarize") >= 0]
    assert summaries, "the folded history went to the summarizer"
    totals = stack.store.usage_totals(ref.key)
    assert "summary" in totals.by_stage
    assert state.history[0].outcome == "completed"
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "history-summarized")

@pytest.mark.stack_env(**QUICK_RETRIES)
async def test_summarizer_failure_falls_back_to_truncation_and_is_recorded(stack: Stack) -> None:
    history = [Message(role="user" if i % 2 == 0 else "assistant",
                       content=f"Message {i}: " + "details about retries and backoff " * 60)
               for i in range(120)]
    ref = stack.cards.import_card(small_card("PAY-9", history=[m.model_dump() for m in history]))
    stack.model.inject(status=500, times=3)  # every attempt of the first summarization fails
    await stack.cards.move(ref, "testing", delivery_id="t9")
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=120)
    run = state.history[0]
    assert run.outcome == "completed"
    assert run.truncated_turns == 1
    assert "summarizer failed" in run.reason
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "summarizer-fallback")


@pytest.mark.stack_env(CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false",
                       CARDLOOP_TEMPORAL__CONTINUE_AS_NEW_AFTER_EVENTS="10")
async def test_continue_as_new_keeps_state_and_dedup(stack: Stack) -> None:
    ref = stack.cards.import_card(small_card("PAY-10"))
    handle = await stack.cards.move(ref, "testing", delivery_id="first")
    first_run = (await handle.describe()).run_id
    await stack.wait_state(ref, lambda s: s.stage_runs == 1 and s.status == "idle")
    for _ in range(100):  # idle with a long history: the card continues as new
        if (await stack.client.get_workflow_handle(ref.workflow_id).describe()).run_id != first_run:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the card workflow did not continue as new")
    second_run = (await stack.client.get_workflow_handle(ref.workflow_id).describe()).run_id
    await stack.cards.move(ref, "testing", delivery_id="first")  # a redelivery after continue-as-new
    await stack.cards.move(ref, "testing", delivery_id="second")
    state = await stack.wait_state(ref, lambda s: s.stage_runs == 2 and s.status == "idle")
    assert [r.run for r in state.history] == [1, 2]
    assert state.seen_deliveries.count("first") == 1
    assert state.input_tokens > 0
    # The run that continued as new, and the run it continued as (which, idle again with a long
    # history, may itself have continued as new by now: its successor is not the one to replay).
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id, run_id=first_run))
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id, run_id=second_run))


async def test_a_closing_run_saves_its_state_by_a_scheduled_activity(stack: Stack) -> None:
    # Saved by a scheduled activity, not a local one (runs recorded before, e.g.
    # histories/state-saved-locally-*, still replay saving it locally): after a local one, a query
    # could make the run decide to close on moves a replay had not seen yet (workflows/local_gate.py).
    ref = stack.cards.import_card(small_card("PAY-77"))
    handle = await stack.cards.move(ref, "testing", delivery_id="s-1")
    await asyncio.wait_for(handle.result(), 60)
    history = await handle.fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert scheduled[-1] == names.SAVE_STATE
    assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
                and b"card.save_state" in e.SerializeToString()]
    saved = stack.store.workflow_state(ref.key)
    assert saved is not None
    closed = CardState.model_validate_json(saved)
    assert (closed.status, [r.outcome for r in closed.history]) == ("done", ["completed"])
    await replay_all(stack.client, handle, "state-saved-by-activity")
    # A later move starts a new run from the saved state: the first run is in its history.
    second = await stack.cards.move(ref, "testing", delivery_id="s-2")
    await asyncio.wait_for(second.result(), 60)
    state = CardState.model_validate_json(stack.store.workflow_state(ref.key) or "")
    assert [r.run for r in state.history] == [1, 2]


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__MAX_TOKENS="8", CARDLOOP_STAGES__PLANNING__MAX_ITERATIONS="2",
                       CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_replies_cut_at_the_output_limit_are_said_to_the_model_and_in_the_reason(stack: Stack) -> None:
    """Each turn's reply ran into max_tokens: the next turn's model was told nothing (its own
    reply just stopped), and the run ended "2 iterations without COMPLETE" without saying why."""
    ref = stack.cards.import_card(small_card("PAY-CUT"))
    stack.model.transcript["planning"] = ["The plan, step by step: " + "first this, then that; " * 40
                                          + "<promise>COMPLETE</promise>"] * 2
    await stack.cards.move(ref, "planning", delivery_id="p-cut")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=60)
    run = state.history[0]
    assert run.outcome == "budget_exhausted"
    assert run.reason == ("2 iterations without COMPLETE (2 of its 2 replies were cut off at the model's output "
                          "limit: max_tokens of the stage or its profile)")
    turns = [r.body for r in stack.model.requests if r.body and "# Stage: planning" in str(r.body.get("system"))]
    assert "Your last reply was cut off at the output limit (8 tokens)" in json.dumps(turns[1]["messages"])
    history = stack.store.get_card(ref.key).history
    assert [(m.role, m.author) for m in history[-2:]] == [("assistant", None), ("user", "cardloop")]
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


async def test_a_comment_on_a_done_card_keeps_its_stage_in_temporal(stack: Stack) -> None:
    """The run a comment reopens on a done card said CardStage "new" (its start's value) until it
    closed again: `card list` without a worker and the UI's `CardStage = 'done'` lost the card."""
    from cardloop.workflows.card_view import CARD_STAGE, CARD_STATUS

    ref = stack.cards.import_card(small_card("PAY-STAGE"))
    await stack.cards.move(ref, "testing", delivery_id="t")
    await stack.wait_state(ref, lambda s: s.status == "done", timeout=90)
    handle = stack.client.get_workflow_handle(ref.workflow_id)
    await handle.result()
    first = (await handle.describe()).run_id
    await stack.cards.say(ref, "one more thing", delivery_id="c-1")
    for _ in range(200):
        described = await handle.describe()
        if described.run_id != first and described.status == WorkflowExecutionStatus.COMPLETED:
            break
        await asyncio.sleep(0.1)
    assert described.run_id != first and described.status == WorkflowExecutionStatus.COMPLETED
    attrs = described.typed_search_attributes
    assert (attrs.get(CARD_STAGE), attrs.get(CARD_STATUS)) == ("done", "done")
    await replay_all(stack.client, handle, "comment-on-done-keeps-stage")
