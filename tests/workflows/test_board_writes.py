"""Results back on the board: a card's stage runs comment on it and move it, through each
board's client against a loopback fake of that board's API (tests/cardloop/integrations/
board_clients/fake_boards.py), exactly once; a refusal is recorded on the card and never
fails the stage; a rate limit waits as long as the board asked."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cardloop.activities.board import BoardActivities
from cardloop.contracts.payloads import BoardCommentInput, CardState
from cardloop.integrations.board_clients.base import is_own_comment
from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board, adf_plain, board_env, serving
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(120)


def told(s: CardState) -> bool:
    """The board has heard of every run's end: its writes go in a lane beside the card's loop."""
    return s.board_told >= s.stage_runs


@pytest.fixture
def boards() -> Iterator[dict[str, Board]]:
    with serving("github") as gh, serving("linear") as li, serving("jira") as ji, serving("trello") as tr, \
            serving("generic") as ge:
        yield {"github": gh, "linear": li, "jira": ji, "trello": tr, "generic": ge}


@pytest.fixture
def stack_overrides(boards: dict[str, Board]) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, board in boards.items():
        env |= board_env(name, board)
    # Jira is written with a credential Jira refuses (401).
    return env | {"TEST_JIRA_WRITE": "bot@acme.example:revoked-token", "CARDLOOP_STAGES__REVIEW__AUTO_ADVANCE": "true"}


def firsts(texts: list[str]) -> list[str]:
    return [t.splitlines()[0] for t in texts]


async def test_a_linear_card_gets_every_comment_and_move_exactly_once(stack: Stack, boards: dict[str, Board]) -> None:
    linear = boards["linear"]
    # The first outcome comment is made, but its answer is lost (a 502 after Linear acted): the
    # retried activity finds the comment by its marker instead of posting it again.
    linear.fail("commentCreate", 502, {"errors": [{"message": "Bad gateway"}]}, {"Retry-After": "0.2"}, after=True)
    ref = stack.cards.import_card(small_card(CARD_ID["linear"], board="linear"))
    handle = await stack.cards.move(ref, "planning", delivery_id="l-1")
    state = await stack.wait_state(ref, lambda s: s.status == "done" and told(s), timeout=90)
    assert [r.outcome for r in state.history] == ["completed"] * 4

    stages = ["planning", "coding", "review", "testing"]
    assert firsts(linear.comments) == [line for n, s in enumerate(stages, 1) for line in (
        f"cardloop · {s} (run {n}) started: the agent is working on this card.",
        f"cardloop · {s} (run {n}) completed.")]
    assert len(set(linear.comments)) == 8 and all(is_own_comment(c) for c in linear.comments)
    plan = linear.comments[1]
    assert "The plan:" in plan and "Plan for PAY-142" in plan and "Next: coding." in plan
    # Each auto-advance moved the card to the stage's column, read first; testing went to Done.
    assert linear.moves == ["In Progress", "In Review", "Testing", "Done"] and linear.column == "Done"
    assert "linear: moved ENG-42 from 'Testing' to 'Done'" in state.board

    # A retried activity whose write was recorded returns the record and asks Linear nothing.
    asked = len(linear.requests)
    again = BoardActivities(stack.runtime).comment(BoardCommentInput(
        card_key=ref.key, key=f"{ref.key}/1/planning", kind="outcome", stage="planning", run=1, outcome="completed"))
    assert again.done == "linear: commented on ENG-42: cardloop · planning (run 1) completed." \
        and len(linear.requests) == asked
    await replay_all(stack.client, handle, "board-writes-linear")


async def test_a_refused_credential_is_recorded_and_the_stage_still_completes(stack: Stack,
                                                                               boards: dict[str, Board]) -> None:
    jira = boards["jira"]
    ref = stack.cards.import_card(small_card(CARD_ID["jira"], board="jira"))
    await stack.cards.move(ref, "testing", delivery_id="j-1")
    state: CardState = await stack.wait_state(ref, lambda s: s.status == "done" and told(s))
    assert [r.outcome for r in state.history] == ["completed"]
    assert state.board.startswith("failed: Jira rejected the credential while reading the comments of PAY-7 (HTTP 401")
    assert "revoked-token" not in state.board
    assert jira.comments == [] and jira.moves == []
    # Refused for good: each write asked once, none retried.
    assert len([r for r in jira.requests if r.path.endswith("/comment")]) == 2


async def test_a_blocked_trello_card_is_labelled_after_waiting_out_a_429(stack: Stack,
                                                                          boards: dict[str, Board]) -> None:
    trello = boards["trello"]
    trello.fail("POST .*/actions/comments", 429, {"message": "Rate limit exceeded"}, {"Retry-After": "1"})
    stack.model.transcript["review"] = ["Which cap applies?\n<promise>BLOCKED</promise> Which cap: 30s or 60s?",
                                        "Cap is 30s as you said.\n<promise>COMPLETE</promise>"]
    ref = stack.cards.import_card(small_card(CARD_ID["trello"], board="trello"))
    handle = await stack.cards.move(ref, "review", delivery_id="t-1")
    state = await stack.wait_state(ref, lambda s: s.status == "blocked" and "label" in s.board and told(s))
    assert firsts(trello.comments) == ["cardloop · review (run 1) started: the agent is working on this card.",
                                       "cardloop · review (run 1) is blocked."]
    assert "Question for the team: Which cap: 30s or 60s?" in trello.comments[1]
    assert trello.labels == ["cardloop: blocked"] and trello.moves == []
    posts = [r for r in trello.requests if r.method == "POST" and r.path.endswith("/actions/comments")]
    assert len(posts) == 3  # the 429, then each comment once
    assert posts[1].at - posts[0].at >= 1.0  # Retry-After: 1 was honoured
    assert "trello: labelled card rE4cW9vC 'cardloop: blocked'" in state.board

    # The answer runs review again: the label comes off, and the card moves on as it completes.
    await stack.cards.say(ref, "Use 30 seconds.", author="priya", delivery_id="c-1")
    await stack.wait_state(ref, lambda s: s.status == "done" and told(s))
    assert trello.labels == [] and trello.moves == ["Testing", "Done"]
    assert firsts(trello.comments)[2:] == [
        "cardloop · review (run 2) started: the agent is working on this card.", "cardloop · review (run 2) completed.",
        "cardloop · testing (run 3) started: the agent is working on this card.",
        "cardloop · testing (run 3) completed."]
    await replay_all(stack.client, handle, "board-writes-blocked")


async def test_github_projects_status_and_generic_webhook(stack: Stack, boards: dict[str, Board]) -> None:
    github, generic = boards["github"], boards["generic"]
    gh = stack.cards.import_card(small_card(CARD_ID["github"], board="github"))
    ge = stack.cards.import_card(small_card(CARD_ID["generic"], board="generic"))
    await stack.cards.move(gh, "testing", delivery_id="g-1")
    await stack.cards.move(ge, "testing", delivery_id="w-1")
    state = await stack.wait_state(gh, lambda s: s.status == "done" and told(s))
    assert firsts(github.comments) == ["cardloop · testing (run 1) started: the agent is working on this card.",
                                       "cardloop · testing (run 1) completed."]
    assert github.comments[1].endswith(f"<!-- cardloop:{gh.key}/1/testing -->")
    assert github.moves == ["Done"]  # updateProjectV2ItemFieldValue with the option id of "Done"
    assert state.history[0].comment == "acme/payments-api#142"
    await stack.wait_state(ge, lambda s: s.status == "done" and told(s))
    events = [json.loads(r.raw) for r in generic.requests]
    assert [e["event"] for e in events] == ["comment", "comment", "move"] and events[2]["to_column"] == "done"
    assert len({e["delivery_id"] for e in events}) == 3 and all(e["actor"] == "cardloop" for e in events)


def test_jira_comments_are_adf_documents() -> None:
    from cardloop.integrations.board_clients.jira import adf, adf_text
    doc = adf("cardloop · coding (run 2) completed.\n\nPull request: https://x/pull/3\nNext: review.")
    assert adf_plain(doc).startswith("cardloop · coding (run 2) completed.")
    assert adf_text(doc).splitlines() == ["cardloop · coding (run 2) completed.", "Pull request: https://x/pull/3",
                                          "Next: review."]


async def test_a_failed_stage_says_its_root_cause_and_how_to_retry(stack: Stack, boards: dict[str, Board]) -> None:
    generic = boards["generic"]
    stack.model.inject(status=400, message="max_tokens: too large for this model")
    ref = stack.cards.import_card(small_card(CARD_ID["generic"], board="generic"))
    await stack.cards.move(ref, "planning", delivery_id="f-1")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and len(generic.requests) >= 2)
    assert state.history[0].outcome == "failed"
    said = [json.loads(r.raw)["text"] for r in generic.requests]
    assert firsts(said) == ["cardloop · planning (run 1) started: the agent is working on this card.",
                            "cardloop · planning (run 1) failed."]
    assert "Root cause: " in said[1] and "max_tokens: too large" in said[1]
    assert f"How to retry: `cardloop card retry {ref.key}`" in said[1]
    assert [json.loads(r.raw)["event"] for r in generic.requests] == ["comment", "comment"]  # no move


async def test_a_board_cardloop_cannot_write_to_gets_a_dry_run(stack: Stack, boards: dict[str, Board]) -> None:
    # The demo's card: board "github-projects" has no client (no credential would behave the same).
    ref = stack.cards.import_card(small_card("PAY-142", board="github-projects"))
    handle = await stack.cards.move(ref, "testing", delivery_id="d-1")
    state = await stack.wait_state(ref, lambda s: s.status == "done" and told(s))
    assert state.board.startswith("would comment: cardloop · testing (run 1) completed. (skipped: board "
                                  "'github-projects' is none of github, linear, jira, trello, generic")
    assert "; would move the card to the column of done (skipped: " in state.board
    assert all(b.requests == [] for b in boards.values())
    await replay_all(stack.client, handle, "board-dry-run-local")
