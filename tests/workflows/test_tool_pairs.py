"""A card's history as stored is not always a history the providers take: a comment that arrives
while a tool runs is stored between the call and its result, and a call whose stage was
cancelled (or moved on, or failed) has no result at all. Every later request was then a 400
("tool_use ids were found without tool_result blocks immediately after"), and the card could
never run again. The assembler now sends the results right after their call and a call left
without one as a line of text; the scripted model checks the pairing as Anthropic does."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from cardloop.app.sample_remote import Remote, push_sample_repo
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import agent_env

pytestmark = pytest.mark.timeout(180)
MARKER = f"{500 + uuid.uuid4().int % 400}.{uuid.uuid4().int % 991}"


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return push_sample_repo(tmp_path / "remotes")


@pytest.fixture
def stack_overrides(remote: Remote, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path)


async def _running_command(stack: Stack, ref_key: str) -> None:
    deadline = time.monotonic() + 90
    while not any(m.tool_calls for m in stack.store.messages(ref_key)):
        assert time.monotonic() < deadline, "the tool call never started"
        await asyncio.sleep(0.05)


async def test_a_comment_made_while_a_tool_runs_does_not_break_the_next_turn(stack: Stack) -> None:
    stack.model.transcript = {"coding": [
        [{"type": "tool_use", "name": "run_command", "input": {"command": f"sleep 3; echo {MARKER}"}}],
        "Noted the comment.\n\n<promise>BLOCKED</promise> Which cap should apply?",
    ]}
    stack.model.reset()
    ref = stack.cards.import_card(small_card("PAIR-1", branch="card/PAIR-1"))
    await stack.cards.move(ref, "coding", delivery_id="p-1")
    await _running_command(stack, ref.key)
    await stack.cards.say(ref, "Keep the 30 s cap, please.", author="priya", delivery_id="c-1")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=120)
    run = state.history[0]
    assert (run.outcome, run.iterations) == ("blocked", 2), run.reason
    roles = [m.role for m in stack.store.messages(ref.key)]
    assert roles[-4:-1] == ["assistant", "user", "tool"]  # stored in arrival order: the comment between
    sent = stack.model.requests[-1].body["messages"]
    call = next(i for i, m in enumerate(sent) if m["role"] == "assistant" and isinstance(m["content"], list)
                and any(b.get("type") == "tool_use" for b in m["content"]))
    after = sent[call + 1]["content"]
    assert after[0]["type"] == "tool_result" and MARKER in str(after[0]["content"])
    assert "Keep the 30 s cap" in str([after[1:], sent[call + 2:]])  # the comment follows the result
    assert "Keep the 30 s cap" not in str(sent[:call + 1])
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


async def test_a_card_whose_tool_call_was_cancelled_runs_again(stack: Stack) -> None:
    stack.model.transcript = {
        "coding": [[{"type": "tool_use", "name": "run_command", "input": {"command": f"sleep {MARKER}"}}]],
        "review": ["Looks fine.\n\n<promise>COMPLETE</promise>"],
    }
    stack.model.reset()
    ref = stack.cards.import_card(small_card("PAIR-2", branch="card/PAIR-2"))
    await stack.cards.move(ref, "coding", delivery_id="p-2")
    await _running_command(stack, ref.key)
    cancelled = await stack.cards.cancel(ref, actor="priya")
    assert cancelled.outcome == "cancelled"
    assert not any(m.role == "tool" for m in stack.store.messages(ref.key))  # the call has no result
    await stack.cards.move(ref, "review", delivery_id="p-3")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 2 and s.history[1].outcome != "running",
                                   timeout=120)
    assert (state.history[1].stage, state.history[1].outcome) == ("review", "completed"), state.history[1].reason
    review = str(stack.model.requests[1].body["messages"])  # coding's one turn, then review's
    assert "no result: it was interrupted" in review and "tool_use" not in review
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
