"""A card named back to an id it had before is written to under that id again, through the real
app, Temporal, store and a loopback fake of Linear's API (which knows the issue as ENG-42 only):
an issue moved to team OPS (ENG-42 -> OPS-7) and back (OPS-7 -> ENG-42) keeps its card, and the
stage its last move starts comments on ENG-42, not on OPS-7, which Linear no longer shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cardloop.contracts.payloads import CardRef, CardState
from tests.cardloop.app.api.test_webhook_board_ids import one, send
from tests.cardloop.app.api.webhook_kit import ENV, Clock, webhook_client
from tests.cardloop.app.boards.conftest import fixture_json
from tests.cardloop.integrations.board_clients.fake_boards import LINEAR_ISSUE, Board, board_env, serving
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)

ENG = f"default/linear/{LINEAR_ISSUE}"


@pytest.fixture
def linear_board() -> Iterator[Board]:
    with serving("linear") as board:
        yield board


@pytest.fixture
def stack_overrides(linear_board: Board) -> dict[str, str]:
    return board_env("linear", linear_board)


def issue_update(team: str, number: int, state: str, minute: int, before: tuple[str, int] | None = None,
                 previous: tuple[str, ...] = ()) -> dict[str, Any]:
    """Linear's recorded issue update (WEB-44's state change), as the issue `team`-`number` in
    `state`, `minute` minutes after it; `before`: moved from that team and number (a team move)."""
    data = json.loads(json.dumps(fixture_json("linear/recorded/issue_update_state.json")).replace(
        "WEB-44", f"{team}-{number}"))
    when = f"2023-04-11T11:{minute:02d}:00.000Z"
    data["data"].update(number=number, identifier=f"{team}-{number}", previousIdentifiers=list(previous),
                        updatedAt=when)
    data["data"]["team"]["key"] = team
    data["data"]["state"]["name"] = state
    data["createdAt"] = when
    data["webhookTimestamp"] += minute * 60_000
    if before is not None:
        data["updatedFrom"] = {"updatedAt": "2023-04-11T10:16:53.022Z", "number": before[1],
                               "teamId": "9e383f51-2629-4f19-97ff-451cc2f0a0ad",
                               "stateId": "a19a64b3-1d56-4ecb-b40e-d14aee5e9368",   # the state changed too
                               "previousIdentifiers": list(previous[:-1])}
    return data


def told(s: CardState) -> bool:
    return s.status == "idle" and bool(s.history) and s.board_told >= s.stage_runs


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_card_named_back_to_its_first_id_is_written_to_under_it(stack: Stack, linear_board: Board) -> None:
    clock = Clock(0)
    async with webhook_client(stack, clock=clock) as api:
        first = one(await send(api, clock, "linear", issue_update("ENG", 42, "Done", 1)))
        assert (first["card"], first["status"]) == (ENG, "accepted"), first
        away = one(await send(api, clock, "linear", issue_update("OPS", 7, "Done", 2, ("ENG", 42), ("ENG-42",))))
        assert (away["card"], away["board_card"], away["status"]) == (ENG, "OPS-7", "accepted"), away
        assert stack.store.board_name(ENG) == "OPS-7"
        # Moved back to team ENG, into Todo: the card under its first key, its id the board's again.
        back = one(await send(api, clock, "linear", issue_update("ENG", 42, "Todo", 3, ("OPS", 7),
                                                                 ("ENG-42", "OPS-7"))))
        assert (back.get("card"), back.get("status"), back.get("stage")) == (ENG, "accepted", "planning"), back
        assert "board_card" not in back
        assert stack.store.board_name(ENG) == LINEAR_ISSUE
    state = await stack.cards.wait_for(CardRef.parse(ENG), told, timeout=90)
    assert [r.stage for r in state.history][-1] == "planning"
    assert "refused" not in state.board and "OPS-7" not in state.board, state.board
    firsts = [c.splitlines()[0] for c in linear_board.comments]
    assert firsts[:2] == ["cardloop · planning (run 1) started: the agent is working on this card.",
                          "cardloop · planning (run 1) completed."], firsts
    # `card list` shows no later id beside the card: the board shows the one its key was made of.
    assert stack.store.board_names("default", "linear") == {ENG: LINEAR_ISSUE}
