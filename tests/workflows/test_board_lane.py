"""Board writes run in a lane of their own beside the card's loop (versions.BOARD_LANE): while the
board is down and a comment retries, `card cancel` answers, the next move runs its stage, and
when the board is back every write lands once, in order. Before, the card awaited its started
comment before it looked at moves or cancels, and its end writes before the next move: a board
outage held the card for as long as the writes retried (up to minutes)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board, board_env, serving
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def linear() -> Iterator[Board]:
    with serving("linear") as board:
        yield board


@pytest.fixture
def stack_overrides(linear: Board) -> dict[str, str]:
    return board_env("linear", linear) | {"CARDLOOP_STAGES__TESTING__AUTO_ADVANCE": "false"}


async def test_a_board_outage_holds_neither_cancel_nor_the_next_move(stack: Stack, linear: Board) -> None:
    # Linear answers 502 to the next four comments: the started comment retries for about 30 s
    # (2 + 4 + 8 + 16 s of backoff) before it lands.
    linear.fail("commentCreate", 502, {"message": "Bad gateway"}, times=4)
    stack.model.transcript["testing"] = ["All green.\n\n<promise>COMPLETE</promise>"]
    stack.model.inject(delay=60.0)  # planning waits for the model until it is cancelled
    ref = stack.cards.import_card(small_card(CARD_ID["linear"], board="linear"))
    began = time.monotonic()
    await stack.cards.move(ref, "planning", delivery_id="l-1")
    await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
    run = await stack.cards.cancel(ref, actor="priya")
    assert run.outcome == "cancelled" and run.stage == "planning"
    await stack.cards.move(ref, "testing", delivery_id="l-2")
    state = await stack.wait_state(ref, lambda s: len(s.history) == 2 and s.status == "idle", timeout=60)
    assert [(r.stage, r.outcome) for r in state.history] == [("planning", "cancelled"), ("testing", "completed")]
    # All of that happened while the board was still refusing the first comment.
    assert linear.comments == [], linear.comments
    assert time.monotonic() - began < 25
    assert state.board_told < 2  # the board has not heard of the runs' ends yet

    # The board comes back: each write lands once, in the order the card made them.
    state = await stack.wait_state(ref, lambda s: s.board_told >= 2, timeout=120)
    lines = [c.splitlines()[0] for c in linear.comments]
    assert lines == ["cardloop · planning (run 1) started: the agent is working on this card.",
                     "cardloop · testing (run 2) started: the agent is working on this card.",
                     "cardloop · testing (run 2) completed."], lines
    assert "linear: commented" in state.board
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "board-lane-outage")
