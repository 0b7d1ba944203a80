"""A completed coding stage puts the card's branch on GitHub as one pull request (a loopback
GitHub speaking the REST shapes PyGithub uses): created once, updated by later runs, never
opened twice; without a token the stage still completes and says why no pull request was made."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.app.scripted_model.transcript import check_transcript
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.cardloop.integrations.sources.fake_github import TOKEN, FakeGitHub
from tests.sample_remote import Remote
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env

pytestmark = pytest.mark.timeout(240)



@pytest.fixture
def stack_overrides(remote: Remote, github: FakeGitHub, tmp_path: Path,
                    request: pytest.FixtureRequest) -> dict[str, str]:
    marker = request.node.get_closest_marker("stack_env")  # a test's own token wins over the default
    token = marker.kwargs.get("CARDLOOP_GITHUB_TOKEN", TOKEN) if marker else TOKEN
    return agent_env(remote, tmp_path, github, CARDLOOP_GITHUB_TOKEN=token,
                     CARDLOOP_STAGES__CODING__AUTO_ADVANCE="false")


async def test_coding_opens_one_pull_request_and_a_later_run_updates_it(stack: Stack, github: FakeGitHub,
                                                                        tmp_path: Path) -> None:
    stack.model.transcript = check_transcript(AGENT, "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card())
    handle = await stack.cards.move(ref, "coding", delivery_id="c-1")
    state = await stack.wait_state(ref, lambda s: len(s.history) == 1 and s.status != "running", timeout=120)
    first = state.history[0]
    assert first.outcome == "completed", first.reason
    [pr] = github.open_pulls("acme/payments-api")
    assert first.pull_request == pr["html_url"]
    assert pr["head"]["ref"] == "card/PAY-1" and pr["base"]["ref"] == "main"
    assert pr["title"] == "PAY-1: Retry failed webhook deliveries"
    assert "caps the delay at max_delay before applying jitter" in pr["body"]  # the agent's finish summary
    assert "Verification passed" in pr["body"] and "4 passed" in pr["body"]
    assert pr["body"].count("<!-- cardloop:acme/github/PAY-1/pull-request -->") == 1
    # The run's outcome is commented on the pull request (the card links no issue), marked once.
    [said] = github.issue_comments[("acme/payments-api", pr["number"])]
    assert said["body"].startswith("**cardloop · coding** (run 1) completed.")
    assert "Branch `card/PAY-1`, pull request " + pr["html_url"] in said["body"]
    assert said["body"].count("<!-- cardloop:acme/github/PAY-1/1/coding -->") == 1
    assert first.comment == f"acme/payments-api#{pr['number']}"
    shown = await cardloop(cli_env(stack, tmp_path), "card", "show", ref.key, "--last", "0")
    assert f"pull request: {pr['html_url']}" in shown.stdout, shown.stdout + shown.stderr
    posted = [s for s in github.seen if s.method == "POST" and s.path.endswith("/pulls")]
    assert len(posted) == 1 and all(s.headers.get("authorization") == f"token {TOKEN}"
                                    for s in github.seen if s.path.startswith("/api/v3/repos"))

    # The card comes back to coding (say, after review): the same pull request is updated.
    await stack.cards.move(ref, "coding", delivery_id="c-2")
    state = await stack.wait_state(ref, lambda s: len(s.history) == 2 and s.status != "running", timeout=120)
    second = state.history[1]
    assert second.outcome == "completed" and second.pull_request == first.pull_request
    assert len(github.open_pulls("acme/payments-api")) == 1
    assert len([s for s in github.seen if s.method == "POST" and s.path.endswith("/pulls")]) == 1
    comments = github.issue_comments[("acme/payments-api", pr["number"])]
    assert [c["body"].splitlines()[0] for c in comments] == ["**cardloop · coding** (run 1) completed.",
                                                             "**cardloop · coding** (run 2) completed."]
    await replay_all(stack.client, handle, "agent-pull-request")


@pytest.mark.stack_env(CARDLOOP_GITHUB_TOKEN="")
async def test_without_a_token_the_stage_completes_and_says_so(stack: Stack, github: FakeGitHub) -> None:
    stack.model.transcript = check_transcript(AGENT, "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("PAY-9", branch="card/PAY-9"))
    await stack.cards.move(ref, "coding", delivery_id="c-9")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=120)
    coding = state.history[0]
    assert coding.outcome == "completed" and coding.pull_request == ""
    assert "(no pull request: no GitHub token (CARDLOOP_GITHUB_TOKEN is not set)" in coding.reason
    assert github.open_pulls("acme/payments-api") == [] and not [s for s in github.seen if s.method == "POST"]


async def test_a_refused_pull_request_leaves_the_stage_completed_with_the_reason(stack: Stack, github: FakeGitHub,
                                                                                 tmp_path: Path) -> None:
    github.fail(r"/pulls$", 403, "Resource not accessible by integration", method="POST")
    stack.model.transcript = check_transcript(AGENT, "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("PAY-10", branch="card/PAY-10"))
    await stack.cards.move(ref, "coding", delivery_id="c-10")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=120)
    coding = state.history[0]
    assert coding.outcome == "completed" and coding.pull_request == ""
    assert "the pull request could not be opened" in coding.reason
    assert "Resource not accessible by integration" in coding.reason and TOKEN not in coding.reason
    # `card show` cuts the reason to a line: the failed pull request still shows, with why.
    shown = await cardloop(cli_env(stack, tmp_path), "card", "show", ref.key, "--last", "0")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    [line] = [x.strip() for x in shown.stdout.splitlines() if x.strip().startswith("pull request:")]
    assert line.startswith("pull request: not opened: GitHub refused (HTTP 403: ")
    assert "Resource not accessible by integration" in line, shown.stdout


async def test_a_blocked_stage_says_why_on_the_cards_issue(stack: Stack, github: FakeGitHub) -> None:
    github.issues[("acme/payments-api", 142)] = {"number": 142}
    stack.model.transcript = check_transcript({**AGENT, "coding": [
        [{"type": "tool_use", "name": "block", "input": {"reason": "Which cap does ADR-0007 want: 30 s or 60 s?"}}]]},
        "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("PAY-11", branch="card/PAY-11",
                                             url="https://github.com/acme/payments-api/issues/142"))
    await stack.cards.move(ref, "coding", delivery_id="c-11")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=120)
    coding = state.history[0]
    assert coding.outcome == "blocked" and coding.comment == "acme/payments-api#142"
    [said] = github.issue_comments[("acme/payments-api", 142)]
    assert said["body"].startswith("**cardloop · coding** (run 1) is blocked.")
    assert "Which cap does ADR-0007 want: 30 s or 60 s?" in said["body"]
    assert github.open_pulls("acme/payments-api") == []  # blocked work gets no pull request
