"""The coding agent end to end: a stage's tool calls act in a git worktree of the sample
repository (examples/sample-repo pushed to a bare remote on disk), COMPLETE is accepted only when
the repository's tests pass, checkpoints reach the card's branch on the remote, and a stuck or
refused agent ends the stage as blocked with the reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cardloop.app.scripted_model.transcript import check_transcript
from cardloop.contracts.payloads import CardState
from tests.sample_remote import Remote
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env

pytestmark = pytest.mark.timeout(240)

BRANCH = "card/PAY-1"
RETRY = "app/webhooks/retry.py"
FIXED = "        capped = min(raw, self.max_delay)\n        if self.jitter:"


@pytest.fixture
def stack_overrides(remote: Remote, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path)


def script(stack: Stack, **stages: Any) -> None:
    stack.model.transcript = check_transcript({**AGENT, **stages}, "test transcript")
    stack.model.reset()


async def run_stage(stack: Stack, stage: str, card_id: str = "PAY-1", **fields: Any) -> CardState:
    ref = stack.cards.import_card(small_card(card_id, **fields))
    await stack.cards.move(ref, stage, delivery_id=f"{card_id}-{stage}")
    return await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=180)


async def test_the_agent_fixes_the_failing_test_and_its_commit_reaches_the_branch(stack: Stack, remote: Remote) -> None:
    script(stack, review=["Looks right.\n\n<promise>COMPLETE</promise>"])
    ref = stack.cards.import_card(small_card())
    handle = await stack.cards.move(ref, "coding", delivery_id="d-coding")
    state = await stack.wait_state(ref, lambda s: s.status in ("done", "blocked"), timeout=200)
    coding = state.history[0]
    assert (coding.stage, coding.outcome) == ("coding", "completed"), coding.reason
    assert coding.tool_calls == 5 and coding.commits == 1 and coding.iterations == 5
    assert [r.stage for r in state.history] == ["coding", "review", "testing"]
    assert all(r.outcome == "completed" for r in state.history), [r.reason for r in state.history]
    # The fix is on the card's branch in the remote, one checkpoint commit on top of main.
    assert FIXED in remote.show(BRANCH, RETRY)
    assert remote.commits(BRANCH)[0].startswith("cardloop: acme/github/PAY-1 run 1 turn 3")
    assert remote.head(BRANCH) == coding.last_commit
    assert "capped = min" not in remote.show("main", RETRY).split("if self.jitter")[0]
    # The history holds every call and its result structurally, and the verification.
    messages = stack.store.messages(ref.key)
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls]
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    assert [c.name for c in calls][:5] == ["read_file", "run_command", "edit_file", "run_command", "finish"]
    assert set(results) >= {c.id for c in calls}
    first_run, second_run = (results[c.id] for c in calls[:5] if c.name == "run_command")
    assert "1 failed" in first_run.content and "4 passed" in second_run.content
    verified = [m for m in messages if m.author == "cardloop" and m.content.startswith("Verification passed")]
    assert len(verified) == 2  # coding's finish and testing's COMPLETE
    # The model was offered the stage's tools natively (Anthropic tools) and got every result back.
    coding_requests = [r for r in stack.model.requests if "# Stage: coding" in json.dumps(r.body.get("system"))]
    assert {t["name"] for t in coding_requests[0].body["tools"]} >= {"read_file", "edit_file", "run_command"}
    await asyncio.wait_for(handle.result(), 30)
    await replay_all(stack.client, handle, "agent-coding")


async def test_a_claim_of_complete_without_passing_tests_goes_back_to_the_model(stack: Stack, remote: Remote) -> None:
    claim = "Fixed the cap.\n\n<promise>COMPLETE</promise>"
    script(stack, coding=[claim, *AGENT["coding"][2:]], review=["ok\n\n<promise>COMPLETE</promise>"])
    state = await run_stage(stack, "coding")
    coding = state.history[0]
    assert coding.outcome == "completed" and coding.iterations == 4, coding.reason
    messages = stack.store.messages(stack.cards.import_card(small_card()).key)
    refused = [m for m in messages if m.author == "cardloop" and m.content.startswith("COMPLETE was not accepted")]
    assert len(refused) == 1 and "1 failed" in refused[0].content
    assert "test_backoff_schedule_caps_at_max_delay" in refused[0].content
    # The refusal reached the model in the next request.
    assert "COMPLETE was not accepted" in json.dumps(stack.model.requests[1].body["messages"])


async def test_the_same_failing_call_three_times_ends_the_stage_blocked(stack: Stack, remote: Remote) -> None:
    missing = [{"type": "tool_use", "name": "read_file", "input": {"path": "app/nowhere.py"}}]
    script(stack, coding=[missing])
    state = await run_stage(stack, "coding", "PAY-2")
    coding = state.history[0]
    assert coding.outcome == "blocked" and coding.iterations == 3
    assert coding.reason.startswith("stuck: the same tool call failed 3 times in a row (read_file")
    assert state.status == "blocked"


async def test_a_refused_push_blocks_the_stage_with_gits_words(stack: Stack, remote: Remote) -> None:
    remote.reject_pushes("branch is protected by policy P-7")
    script(stack)
    state = await run_stage(stack, "coding", "PAY-3", branch="card/PAY-3")
    coding = state.history[0]
    assert coding.outcome == "blocked" and coding.iterations == 3  # the edit's checkpoint was refused
    assert "the checkpoint could not be pushed" in coding.reason and "P-7" in coding.reason
    assert remote.head("card/PAY-3") is None


async def test_path_escapes_are_refused_as_results_not_failures(stack: Stack, remote: Remote, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP SECRET")
    link = [{"type": "tool_use", "name": "write_file", "input": {"path": "link/x", "content": "x"}}]
    script(stack, coding=[
        [{"type": "tool_use", "name": "read_file", "input": {"path": "../../../secret.txt"}}],
        [{"type": "tool_use", "name": "read_file", "input": {"path": str(outside)}}],
        [{"type": "tool_use", "name": "run_command", "input": {"command": f"ln -s {tmp_path} link"}}],
        [{"type": "tool_use", "name": "read_file", "input": {"path": "link/secret.txt"}}],
        link,
        [{"type": "tool_use", "name": "block", "input": {"reason": "cannot read outside the workspace"}}],
    ])
    state = await run_stage(stack, "coding", "PAY-4", branch="card/PAY-4")
    coding = state.history[0]
    assert coding.outcome == "blocked" and coding.reason == "cannot read outside the workspace"
    key = stack.cards.import_card(small_card("PAY-4", branch="card/PAY-4")).key
    results = [m for m in stack.store.messages(key) if m.role == "tool"]
    assert [m.is_error for m in results] == [True, True, False, True, True, False]
    assert all("TOP SECRET" not in m.content for m in results)


async def test_a_card_without_a_repository_stays_text_only(stack: Stack) -> None:
    script(stack, coding=["Nothing to change here.\n\n<promise>COMPLETE</promise>"])
    state = await run_stage(stack, "coding", "PAY-5", repo=None, branch=None)
    coding = state.history[0]
    assert coding.outcome == "completed" and coding.tool_calls == 0
    assert "tools" not in stack.model.requests[0].body


@pytest.mark.stack_env(CARDLOOP_TENANTS__ACME__REPOS='["acme/other-service"]')
async def test_a_repository_off_the_tenants_allow_list_gets_no_workspace(stack: Stack, tmp_path: Path) -> None:
    script(stack)
    state = await run_stage(stack, "coding", "PAY-6")
    coding = state.history[0]
    assert coding.outcome == "failed" and not coding.transient
    assert "tenant 'acme' may not read repository 'acme/payments-api'" in coding.reason
    assert stack.model.request_count == 0  # refused before any turn
    assert not (tmp_path / "workspaces").exists() or not any((tmp_path / "workspaces").rglob("retry.py"))


@pytest.mark.stack_env(CARDLOOP_STAGES__CODING__MAX_ITERATIONS="4")
async def test_a_spent_budget_keeps_the_work_on_the_branch(stack: Stack, remote: Remote) -> None:
    script(stack, coding=[*AGENT["coding"][:3], [{"type": "tool_use", "name": "git_diff", "input": {}}]])
    state = await run_stage(stack, "coding", "PAY-8", branch="card/PAY-8")
    coding = state.history[0]
    assert coding.outcome == "budget_exhausted" and coding.iterations == 4
    assert coding.reason.startswith("4 iterations without COMPLETE; the work is kept on card/PAY-8 at ")
    assert coding.last_commit[:12] in coding.reason and remote.head("card/PAY-8") == coding.last_commit
    assert FIXED in remote.show("card/PAY-8", RETRY)


async def test_a_refused_claims_reason_shows_the_failures_not_the_warnings(stack: Stack, remote: Remote) -> None:
    """Test output that opens with pages of warnings: the blocked run's reason still shows how
    the tests ended (the excerpt keeps head, error lines and tail, not the first characters)."""
    noise = {"type": "tool_use", "name": "write_file",
             "input": {"path": "tests/conftest.py",
                       "content": "import sys\n\nsys.stderr.write('DeprecationWarning: option unset\\n' * 200)\n"}}
    claim = "Fixed the cap.\n\n<promise>COMPLETE</promise>"
    script(stack, coding=[[noise], claim, claim, claim])
    state = await run_stage(stack, "coding", "PAY-NOISE")
    coding = state.history[0]
    assert coding.outcome == "blocked" and coding.reason.startswith("COMPLETE was refused 3 times"), coding.reason
    assert "1 failed, 3 passed" in coding.reason and "test_backoff_schedule_caps_at_max_delay" in coding.reason
    assert len(coding.reason) < 2_000
