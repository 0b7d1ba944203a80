"""error_fixing waits for the pushed commit's CI (GitHub Actions on a loopback GitHub): a failed
run refuses the claim of COMPLETE and its job's log reaches the model; a later commit whose CI
passes completes the stage; a repository without CI is accepted after the grace period."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.app.scripted_model.transcript import check_transcript
from tests.cardloop.integrations.sources.fake_github import (
    LOGS,
    PYTEST_STEPS,
    REPO,
    FakeGitHub,
    Seen,
)
from tests.sample_remote import Remote
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env

pytestmark = pytest.mark.timeout(240)

EDIT, FINISH = AGENT["coding"][2], AGENT["coding"][4]
NOTE = [{"type": "tool_use", "name": "write_file",
         "input": {"path": "NOTES.md", "content": "CI: the pinned schedule is asserted with jitter off.\n"}}]


@pytest.fixture
def stack_overrides(remote: Remote, github: FakeGitHub, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path, github, CARDLOOP_WORKSPACE__CI_POLL_SECONDS="0.5",
                     CARDLOOP_WORKSPACE__CI_NONE_GRACE_SECONDS="3", CARDLOOP_WORKSPACE__CI_WAIT_SECONDS="60",
                     CARDLOOP_WORKSPACE__PULL_REQUESTS="[]", CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE="false")


class CI:
    """GitHub Actions for the pushed commits: the first commit's run is in progress when first
    asked, then fails in its pytest job; every later commit's run succeeds."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake, self.asked, self.first = fake, {}, None
        fake.hooks.append(self)

    def __call__(self, seen: Seen) -> None:
        sha = seen.query.get("head_sha")
        if not seen.path.endswith("/actions/runs") or not sha:
            return
        fake = self.fake
        self.asked[sha] = self.asked.get(sha, 0) + 1
        self.first = self.first or sha
        runs = [r for r in fake.runs.get(REPO, []) if r["head_sha"] != sha]
        if sha != self.first:
            runs.append(fake.run_json(REPO, 3002, name="CI", workflow_id=11, head_sha=sha, conclusion="success"))
        elif self.asked[sha] == 1:
            runs.append(fake.run_json(REPO, 3001, name="CI", workflow_id=11, head_sha=sha, status="in_progress",
                                      conclusion=None))
        else:
            runs.append(fake.run_json(REPO, 3001, name="CI", workflow_id=11, head_sha=sha))
            fake.jobs[3001] = [fake.job_json(REPO, 3001, 4001, name="test (3.11)", workflow="CI",
                                             steps=PYTEST_STEPS, head_sha=sha)]
            fake.logs[4001] = (LOGS / "gha_pytest_failure.log").read_bytes()
        fake.runs[REPO] = runs


async def test_a_failed_ci_run_refuses_the_claim_and_a_green_one_completes(stack: Stack, github: FakeGitHub,
                                                                           remote: Remote) -> None:
    ci = CI(github)
    stack.model.transcript = check_transcript({**AGENT, "error_fixing": [EDIT, FINISH, NOTE, FINISH]}, "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("CI-1", branch="card/CI-1"))
    handle = await stack.cards.move(ref, "error_fixing", delivery_id="e-1")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=180)
    run = state.history[0]
    assert run.outcome == "completed" and run.iterations == 4 and run.commits == 2, run.reason
    first, second = ci.first, remote.head("card/CI-1")
    assert ci.asked[first] >= 2 and ci.asked[second] >= 1 and first != second
    refusals = [m.content for m in stack.store.messages(ref.key)
                if m.author == "cardloop" and m.content.startswith("COMPLETE was not accepted: CI of")]
    assert len(refusals) == 1 and first[:12] in refusals[0]
    assert "test (3.11)" in refusals[0] and "FAILED" in refusals[0]  # the failed job's log excerpt
    await replay_all(stack.client, handle, "agent-ci")


async def test_a_repository_without_ci_is_accepted_after_the_grace_period(stack: Stack, github: FakeGitHub) -> None:
    stack.model.transcript = check_transcript({**AGENT, "error_fixing": [EDIT, FINISH]}, "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("CI-2", branch="card/CI-2"))
    await stack.cards.move(ref, "error_fixing", delivery_id="e-2")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=120)
    run = state.history[0]
    assert run.outcome == "completed" and run.iterations == 2, run.reason
    asked = [s for s in github.seen if s.path.endswith("/actions/runs")]
    assert len(asked) >= 2  # polled until the grace period ran out
