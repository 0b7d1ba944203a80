"""The review stage's line comments (the review_comment tool) become one pull request review on
the branch's open pull request (a loopback GitHub): posted once with the comments on their
lines, or with them in the body when GitHub says a line is outside the diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.app.scripted_model.transcript import check_transcript
from cardloop.integrations.workspace.tools.review import MAX_PER_REVIEW, REVIEW_FULL
from tests.cardloop.integrations.sources.fake_github import REPO, FakeGitHub
from tests.sample_remote import Remote
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env
from workflows.workspace import MAX_REVIEW_COMMENTS

pytestmark = pytest.mark.timeout(240)

RETRY = "app/webhooks/retry.py"


def remark(line: int, body: str) -> list[dict]:
    return [{"type": "tool_use", "name": "review_comment", "input": {"path": RETRY, "line": line, "body": body}}]


REVIEW = [remark(22, "Cap before the jitter branch, or jitter off grows past max_delay."),
          remark(99, "Past the end of the file."),
          "Two things to fix before merging; see the line comments.\n\n<promise>COMPLETE</promise>"]


@pytest.fixture
def stack_overrides(remote: Remote, github: FakeGitHub, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path, github, CARDLOOP_STAGES__REVIEW__AUTO_ADVANCE="false")


async def run_review(stack: Stack, card_id: str) -> tuple:
    stack.model.transcript = check_transcript({**AGENT, "review": REVIEW}, "agent")
    stack.model.reset()
    ref = stack.cards.import_card(small_card(card_id, branch=f"card/{card_id}"))
    handle = await stack.cards.move(ref, "review", delivery_id=f"r-{card_id}")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=120)
    return state.history[0], handle


async def test_line_comments_become_one_review_on_the_pull_request(stack: Stack, github: FakeGitHub) -> None:
    pr = github.new_pull(REPO, head="card/RV-1", base="main", title="RV-1", body="")
    run, handle = await run_review(stack, "RV-1")
    assert run.outcome == "completed" and run.tool_calls == 2, run.reason
    [review] = github.reviews[(REPO, pr["number"])]
    assert run.review == review["html_url"]
    assert review["body"].count("<!-- cardloop:acme/github/RV-1/1/review/review -->") == 1
    [line] = github.review_comments[(REPO, pr["number"])]
    assert (line["path"], line["line"]) == (RETRY, 22) and line["body"].startswith("Cap before the jitter")
    # The comment on a line past the end of the file was refused to the model and never posted.
    results = [m for m in stack.store.messages(stack.cards.import_card(small_card("RV-1", branch="card/RV-1")).key)
               if m.role == "tool"]
    assert [m.is_error for m in results] == [False, True] and "has 31 lines" in results[1].content
    await replay_all(stack.client, handle, "agent-review")


async def test_a_line_outside_the_diff_moves_the_comments_into_the_review_body(stack: Stack,
                                                                                github: FakeGitHub) -> None:
    pr = github.new_pull(REPO, head="card/RV-2", base="main", title="RV-2", body="")
    github.diff_lines[(REPO, pr["number"])] = {RETRY: {1, 2, 3}}
    run, _ = await run_review(stack, "RV-2")
    assert run.outcome == "completed" and run.review
    [review] = github.reviews[(REPO, pr["number"])]
    assert f"`{RETRY}:22`: Cap before the jitter branch" in review["body"]
    assert github.review_comments.get((REPO, pr["number"]), []) == []


async def test_without_an_open_pull_request_the_review_says_so(stack: Stack, github: FakeGitHub) -> None:
    run, _ = await run_review(stack, "RV-3")
    assert run.outcome == "completed" and run.review == ""
    assert "(review not posted: no open pull request from card/RV-3 in acme/payments-api)" in run.reason


async def test_past_the_reviews_cap_the_model_is_told_and_nothing_is_dropped_unsaid(stack: Stack,
                                                                                     github: FakeGitHub) -> None:
    """A review carries MAX_REVIEW_COMMENTS line comments; a call past them is refused to the
    model at the call (its remark goes into the finish summary, the review's body), never
    answered "noted" and then dropped."""
    cap = MAX_REVIEW_COMMENTS
    assert cap == MAX_PER_REVIEW
    many = [{"type": "tool_use", "name": "review_comment",
             "input": {"path": RETRY, "line": 1 + n % 31, "body": f"Remark {n}."}} for n in range(cap + 2)]
    done = "Reviewed. Also: Remark 50 and Remark 51 (past the cap).\n\n<promise>COMPLETE</promise>"
    stack.model.transcript = check_transcript({**AGENT, "review": [many, done]}, "agent")
    stack.model.reset()
    pr = github.new_pull(REPO, head="card/RV-4", base="main", title="RV-4", body="")
    ref = stack.cards.import_card(small_card("RV-4", branch="card/RV-4"))
    await stack.cards.move(ref, "review", delivery_id="r-RV-4")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=180)
    run = state.history[0]
    assert run.outcome == "completed" and run.review, run.reason
    results = [m for m in stack.store.messages(ref.key) if m.role == "tool"]
    assert [m.is_error for m in results] == [False] * cap + [True, True]
    assert all(m.content == REVIEW_FULL for m in results[cap:])
    assert all("noted" in m.content and "not noted" not in m.content for m in results[:cap])
    posted = github.review_comments[(REPO, pr["number"])]
    assert [c["body"] for c in posted] == [f"Remark {n}." for n in range(cap)]
