"""cardloop's own writes coming back from the board are acknowledged and start nothing: a move
into the column cardloop just moved the card to, a delivery made by cardloop's own account,
a comment carrying a cardloop marker. A person's move right after still counts, and so does a
person's move back into cardloop's column once the card was moved elsewhere, or by someone the
card already took a move or comment of."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import Card
from tests.cardloop.app.api.webhook_kit import ENV, Clock, generic, hub_signature, linear_signature, webhook_client
from tests.cardloop.integrations.board_clients.fake_boards import Board, board_env, serving
from tests.stack import Stack

pytestmark = pytest.mark.timeout(120)
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


@pytest.fixture
def receiver() -> Iterator[Board]:
    with serving("generic") as board:
        yield board


@pytest.fixture
def stack_overrides(receiver: Board) -> dict[str, str]:
    return {**ENV, **board_env("generic", receiver)}


async def test_the_boards_echo_of_our_own_writes_starts_nothing(stack: Stack, receiver: Board) -> None:
    ref = CardRef(tenant="default", board="generic", card_id="WEB-E1")
    async with webhook_client(stack) as api:
        async def deliver(body: bytes) -> dict[str, object]:
            r = await api.post("/webhooks/generic", content=body, headers={
                "content-type": "application/json", "x-hub-signature-256": hub_signature(body)})
            assert r.status_code == 200, r.text
            return r.json()["events"][0]

        assert (await deliver(generic("WEB-E1", "testing", "p-1", actor="priya")))["status"] == "accepted"
        state = await stack.cards.wait_for(ref, lambda s: s.status == "done" and s.board_told >= s.stage_runs,
                                           timeout=60)
        # testing completed and auto-advanced: cardloop sent its comments and moved the card to "done".
        assert [json.loads(r.raw)["event"] for r in receiver.requests] == ["comment", "comment", "move"]

        # The board echoes that move (it does not say who moved it): the same column, just now.
        echo = await deliver(generic("WEB-E1", "done", "echo-1", actor="board-automation"))
        assert echo["status"] == "ignored" and "cardloop moved the card to 'done'" in echo["reason"]
        # A delivery made by cardloop's own account (write_actor), whatever column it names.
        mine = await deliver(generic("WEB-E1", "coding", "echo-2", actor="cardloop"))
        assert mine["status"] == "ignored" and "cardloop's own generic account" in mine["reason"]
        # A comment carrying a cardloop marker: our comment coming back.
        ours = await deliver(generic("WEB-E1", None, "echo-3", actor="someone",
                                     comment=f"Done.\n\ncardloop:{ref.key}/1/testing"))
        assert ours["status"] == "ignored" and "marker" in ours["reason"]
        after = await stack.cards.state(ref)
        assert after is not None and len(after.history) == len(state.history) == 1

        # A person moving the card on is no echo.
        moved = await deliver(generic("WEB-E1", "review", "p-2", actor="priya"))
        assert moved["status"] == "accepted" and moved["stage"] == "review"


async def test_our_comment_in_a_real_linear_delivery_is_recognised(stack: Stack) -> None:
    payload = json.loads((FIXTURES / "linear" / "comment_create.json").read_text())
    payload["data"]["body"] += "\n\ncardloop:default/linear/ENG-123/2/planning"
    body = json.dumps(payload).encode()
    stack.cards.import_card(Card(id="ENG-123", tenant="default", board="linear", title="Retry failed payouts"))
    clock = Clock(payload["webhookTimestamp"] / 1000)
    async with webhook_client(stack, clock=clock) as api:
        r = await api.post("/webhooks/linear", content=body, headers={
            "content-type": "application/json", "linear-signature": linear_signature(body)})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert event["status"] == "ignored" and "cardloop's own comment" in event["reason"]
    assert await stack.cards.state(CardRef(tenant="default", board="linear", card_id="ENG-123")) is None


async def a_card_cardloop_moved_to_done(stack: Stack, receiver: Board, api, card_id: str) -> CardRef:
    """priya moves the card to testing; it completes and cardloop moves it on to "done" (its board move)."""
    ref = CardRef(tenant="default", board="generic", card_id=card_id)
    assert (await deliver(api, generic(card_id, "testing", f"{card_id}-1", actor="priya")))["status"] == "accepted"
    await stack.cards.wait_for(ref, lambda s: s.status == "done" and s.board_told >= s.stage_runs, timeout=60)
    assert [json.loads(r.raw)["event"] for r in receiver.requests][-1] == "move"
    return ref


async def deliver(api, body: bytes) -> dict[str, object]:
    r = await api.post("/webhooks/generic", content=body, headers={
        "content-type": "application/json", "x-hub-signature-256": hub_signature(body)})
    assert r.status_code == 200, r.text
    return r.json()["events"][0]


@pytest.mark.stack_env(CARDLOOP_STAGES__REVIEW__AUTO_ADVANCE="false")
async def test_a_person_moving_the_card_back_into_cardloops_column_is_no_echo(stack: Stack, receiver: Board) -> None:
    async with webhook_client(stack) as api:
        ref = await a_card_cardloop_moved_to_done(stack, receiver, api, "WEB-E2")
        # priya takes it out of done (review runs) and, seconds later, puts it back: her move, not ours.
        assert (await deliver(api, generic("WEB-E2", "review", "E2-2", actor="priya")))["status"] == "accepted"
        back = await deliver(api, generic("WEB-E2", "done", "E2-3", actor="priya"))
        assert back["status"] == "accepted" and back["stage"] == "done", back
        await stack.cards.wait_for(ref, lambda s: s.status == "done" and s.board_told >= s.stage_runs, timeout=60)


async def test_a_move_out_to_a_column_no_stage_maps_counts_too(stack: Stack, receiver: Board) -> None:
    async with webhook_client(stack) as api:
        await a_card_cardloop_moved_to_done(stack, receiver, api, "WEB-E3")
        # A board that does not say who moves cards: out to the icebox (no stage) and back.
        out = await deliver(api, generic("WEB-E3", "Icebox", "E3-2"))
        assert out["status"] == "ignored" and "not mapped" in out["reason"]
        back = await deliver(api, generic("WEB-E3", "done", "E3-3"))
        assert back["status"] == "accepted" and back["stage"] == "done", back


async def test_a_person_the_card_knows_is_never_taken_for_cardloop(stack: Stack, receiver: Board) -> None:
    async with webhook_client(stack) as api:
        await a_card_cardloop_moved_to_done(stack, receiver, api, "WEB-E4")
        # The board lost the delivery of priya's move out of done; her move back in still counts.
        back = await deliver(api, generic("WEB-E4", "done", "E4-3", actor="priya"))
        assert back["status"] == "accepted" and back["stage"] == "done", back
        # While an account the card has never seen act, moving it there, is the board echoing us.
        echo = await deliver(api, generic("WEB-E4", "done", "E4-4", actor="board-automation"))
        assert echo["status"] == "ignored" and "cardloop moved the card to 'done'" in echo["reason"]
