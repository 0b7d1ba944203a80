"""A card whose issue moved to another team on its board since it was created (WEB-9, now
ENG-42) is written to under the id the board gives it now (activities/board.py reads it from
store/aliases.py), against the loopback fake of Linear's API, which knows the issue only as
ENG-42 (or its UUID): comments and the move land on the issue, under the card's first key."""

from __future__ import annotations

import pytest

from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board
from tests.stack import Stack, replay_all, small_card
from tests.workflows.test_board_writes import boards, stack_overrides, told

__all__ = ["boards", "stack_overrides"]   # the fixtures this module uses
pytestmark = pytest.mark.timeout(120)


async def test_a_card_renamed_on_its_board_is_written_to_under_its_new_id(stack: Stack,
                                                                         boards: dict[str, Board]) -> None:
    linear = boards["linear"]
    ref = stack.cards.import_card(small_card("WEB-9", board="linear"))   # created under its old identifier
    assert ref.key == "acme/linear/WEB-9"
    stack.store.remember_board_ids(ref.key, uid="9cfb482a-81e3-4154-b5b9-2c805e70a02d", name=CARD_ID["linear"])
    handle = await stack.cards.move(ref, "testing", delivery_id="r-1")
    state = await stack.wait_state(ref, lambda s: s.status == "done" and told(s))
    assert [c.splitlines()[0] for c in linear.comments] == [
        "cardloop · testing (run 1) started: the agent is working on this card.",
        "cardloop · testing (run 1) completed."]
    assert linear.column == "Done" and f"linear: moved {CARD_ID['linear']} from" in state.board, state.board
    assert "WEB-9" not in state.board and "refused" not in state.board
    await replay_all(stack.client, handle)
