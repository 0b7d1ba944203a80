"""Each board hears of every stage of a card exactly once: a card on GitHub Projects, Jira,
Trello and the generic webhook goes planning -> coding -> review -> testing -> done, and its
board gets each stage's start and outcome comment once and the card moved column by column
(Linear has its own test, with a lost answer, in test_board_writes.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cardloop.contracts.payloads import CardState
from cardloop.integrations.board_clients.base import is_own_comment
from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board, adf_plain, board_env, serving
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(120)

STAGES = ("planning", "coding", "review", "testing")
EXPECTED = [line for n, s in enumerate(STAGES, 1) for line in (
    f"cardloop · {s} (run {n}) started: the agent is working on this card.", f"cardloop · {s} (run {n}) completed.")]


def told(s: CardState) -> bool:
    """The board has heard of every run's end: its writes go in a lane beside the card's loop."""
    return s.board_told >= s.stage_runs


@pytest.fixture(scope="module")
def boards() -> Iterator[dict[str, Board]]:
    with serving("github") as gh, serving("jira") as ji, serving("trello") as tr, serving("generic") as ge:
        yield {"github": gh, "jira": ji, "trello": tr, "generic": ge}


@pytest.fixture
def stack_overrides(boards: dict[str, Board]) -> dict[str, str]:
    env: dict[str, str] = {"CARDLOOP_STAGES__REVIEW__AUTO_ADVANCE": "true"}
    for name, board in boards.items():
        env |= board_env(name, board)
    return env


@pytest.mark.parametrize("name", ["github", "jira", "trello", "generic"])
async def test_every_stage_reaches_the_board_once(stack: Stack, boards: dict[str, Board], name: str) -> None:
    board = boards[name]
    ref = stack.cards.import_card(small_card(CARD_ID[name], board=name))
    handle = await stack.cards.move(ref, "planning", delivery_id=f"{name}-every")
    state = await stack.wait_state(ref, lambda s: s.status == "done" and told(s), timeout=90)
    assert [r.outcome for r in state.history] == ["completed"] * 4
    if name == "generic":
        events = [json.loads(r.raw) for r in board.requests]
        comments = [e["text"].splitlines()[0] for e in events if e["event"] == "comment"]
        moves = [e["to_column"] for e in events if e["event"] == "move"]
        assert comments == EXPECTED
        assert len({e["delivery_id"] for e in events}) == len(events)
    else:
        # Jira keeps comments as ADF documents: their text is what a person reads.
        texts = [adf_plain(json.loads(c)) for c in board.comments] if name == "jira" else board.comments
        assert [t.splitlines()[0] for t in texts] == EXPECTED
        assert all(is_own_comment(t) for t in texts)
        moves = board.moves
    assert len(moves) == 4 and len(set(moves)) == 4, moves  # one move per auto-advance, none repeated
    await replay_all(stack.client, handle)


async def test_a_403_is_recorded_and_the_stage_completes(stack: Stack, boards: dict[str, Board]) -> None:
    trello = boards["trello"]
    trello.fail("POST .*/actions/comments", 403, {"message": "unauthorized card permission requested"}, times=10)
    before = len(trello.requests)
    ref = stack.cards.import_card(small_card(CARD_ID["trello"], board="trello"))
    await stack.cards.move(ref, "testing", delivery_id="trello-403")
    state = await stack.wait_state(ref, lambda s: s.status == "done" and told(s) and "403" in s.board, timeout=60)
    assert [r.outcome for r in state.history] == ["completed"]
    assert state.board.startswith("failed:") and "403" in state.board
    posts = [r for r in trello.requests[before:] if r.method == "POST" and r.path.endswith("/actions/comments")]
    # (The start comment of this card key was already on the shared fake board: found, not posted.)
    assert posts and len({r.raw for r in posts}) == len(posts)  # each refused comment tried once: never retried
    trello.failures.clear()
