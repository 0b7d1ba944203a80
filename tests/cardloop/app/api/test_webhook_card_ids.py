"""Card ids from webhooks, through the real app and Temporal: an id that cannot be kept as it is
is a 400 naming it, two board cards never share a key, and the webhook, the CLI, the store and
the workflow id agree on a card's key."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from cardloop.app.cli.service import _resolve
from cardloop.contracts.payloads import CardRef
from tests.cardloop.app.boards.conftest import fixture_bytes
from tests.stack import Stack

from .webhook_kit import ENV, Clock, at, hub_signature, webhook_client

pytestmark = pytest.mark.timeout(240)


def move(card: str) -> bytes:
    return json.dumps({"card_id": card, "stage": "testing", "delivery_id": f"d-{card}", "title": "t"}).encode()


async def post(api, body: bytes):
    return await api.post("/webhooks/generic", content=body, headers={"x-hub-signature-256": hub_signature(body)})


@pytest.mark.stack_env(**ENV)
async def test_ids_that_cannot_be_kept_are_400_naming_the_id(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        for card_id in ["////", "...", "pay\u202e-142", "PAY\u200b-142", "PAY 142"]:
            r = await post(api, move(card_id))
            assert r.status_code == 400, (card_id, r.text)
            assert ascii(card_id) in r.json()["detail"]
    started = [wf.id async for wf in stack.client.list_workflows(f"TaskQueue = '{stack.task_queue}'")]
    assert started == []


@pytest.mark.stack_env(**ENV)
async def test_a_slash_and_a_literal_colon_are_two_cards(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        slashed = (await post(api, move("a/b/c"))).json()["events"][0]
        coloned = (await post(api, move("a:b:c"))).json()["events"][0]
    assert (slashed["status"], coloned["status"]) == ("accepted", "accepted")
    assert (slashed["card"], coloned["card"]) == ("default/generic/a:b:c", "default/generic/a%3Ab%3Ac")
    for event, board_id in ((slashed, "a/b/c"), (coloned, "a:b:c")):
        card = stack.store.card_fields(event["card"])
        assert card is not None and card.id == board_id   # the store keeps the board's own id
        assert event["workflow_id"] == f"card/{event['card']}"
        await stack.cards.wait_for(CardRef.parse(event["card"]), lambda s: s.status == "done", timeout=60)


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_the_cli_and_a_webhook_reach_the_same_card(stack: Stack, tmp_path: Path) -> None:
    card_file = tmp_path / "card.json"
    card_file.write_text(json.dumps({"id": "Codertocat/Hello-World#1", "tenant": "default", "board": "github",
                                     "title": "Spelling error in the README file"}))
    ref, card = _resolve(str(card_file), argparse.Namespace(tenant=None, board=None))   # as `cardloop card move`
    assert card is not None and ref.key == "default/github/Codertocat:Hello-World#1"
    stack.cards.import_card(card)
    await stack.cards.move(ref, "testing", delivery_id="cli-1")
    await stack.cards.wait_for(ref, lambda s: s.stage_runs == 1 and s.status == "idle", timeout=60)

    body = fixture_bytes("github/issue_comment.created.json")   # a comment on Codertocat/Hello-World#1
    async with webhook_client(stack, clock=Clock(at("2019-05-15T15:20:21Z"))) as api:
        r = await api.post("/webhooks/github", content=body, headers={
            "x-github-event": "issue_comment", "x-github-delivery": "gh-c1",
            "x-hub-signature-256": hub_signature(body)})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert (event["status"], event["card"], event["workflow_id"]) == ("accepted", ref.key, ref.workflow_id)
    comment = json.loads(body)["comment"]["body"]
    for _ in range(100):   # the card workflow stores the comment under the card's one key
        if any(m.content == comment for m in stack.store.messages(ref.key)):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the webhook's comment did not reach the card the CLI moved")
