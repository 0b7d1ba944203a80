"""A card edited on its board after cardloop first saw it, through the real app and Temporal: a
renamed title or an edited description that a later delivery carries reaches the stored card
(every stage turn reads its fields from the store), so the next stage works on what the card asks
today, not on what it asked when it was created. A card's repository and branch are where its
work was pushed: a card created without a repository gets the one the board links it to later,
but a card's repository is never switched under its pushed work."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.cardloop.app.api.webhook_kit import ENV, Clock, hub_signature, linear_signature, webhook_client
from tests.cardloop.app.boards.conftest import fixture_json
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)


async def post_generic(api: httpx.AsyncClient, **fields: object) -> dict[str, object]:
    body = json.dumps(fields).encode()
    r = await api.post("/webhooks/generic", content=body, headers={
        "content-type": "application/json", "x-hub-signature-256": hub_signature(body)})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    return event


@pytest.mark.stack_env(**ENV)
async def test_a_title_and_description_edited_on_the_board_reach_the_card(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        first = await post_generic(api, card_id="EDIT-1", stage="done", delivery_id="e-1",
                                   title="Rotate the TLS certs", body="Only the API's certificate.",
                                   repo="acme/infra", branch="ops/certs")
        assert first["status"] == "accepted", first
        second = await post_generic(api, card_id="EDIT-1", stage="done", delivery_id="e-2",
                                    title="Rotate the TLS certs and the SSH host keys",
                                    body="The API's certificate and every host key.",
                                    url="https://boards.example/EDIT-1",
                                    repo="acme/other", branch="ops/other")
        assert second["status"] == "accepted", second
    card = stack.store.card_fields("default/generic/EDIT-1")
    assert card is not None
    assert card.title == "Rotate the TLS certs and the SSH host keys"
    assert card.body == "The API's certificate and every host key."
    assert card.url == "https://boards.example/EDIT-1"
    # Its work lives on acme/infra's ops/certs: not switched by a later delivery.
    assert (card.repo, card.branch) == ("acme/infra", "ops/certs")


@pytest.mark.stack_env(**ENV)
async def test_a_card_without_a_repository_gets_the_one_the_board_names_later(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        await post_generic(api, card_id="EDIT-2", stage="done", delivery_id="e-1", title="Write the runbook")
        # A comment alone leaves the fields as they were; its values that are not given change nothing.
        await post_generic(api, card_id="EDIT-2", comment="any news?", delivery_id="e-2")
        card = stack.store.card_fields("default/generic/EDIT-2")
        assert card is not None and card.repo is None and card.title == "Write the runbook"
        await post_generic(api, card_id="EDIT-2", stage="done", delivery_id="e-3",
                           repo="acme/runbooks", branch="docs/runbook")
    card = stack.store.card_fields("default/generic/EDIT-2")
    assert card is not None and (card.repo, card.branch) == ("acme/runbooks", "docs/runbook")
    assert card.title == "Write the runbook"


@pytest.mark.stack_env(**ENV)
async def test_a_linear_issue_renamed_before_its_next_move_reaches_the_card(stack: Stack) -> None:
    payload = fixture_json("linear/issue_update_state.json")
    payload["data"]["state"]["name"] = "Done"
    clock = Clock(payload["webhookTimestamp"] / 1000 + 1)

    async def send(data: dict[str, object]) -> dict[str, object]:
        body = json.dumps(data).encode()
        r = await api.post("/webhooks/linear", content=body, headers={
            "content-type": "application/json", "linear-signature": linear_signature(body)})
        assert r.status_code == 200, r.text
        [event] = r.json()["events"]
        assert event["status"] == "accepted", event
        return event

    async with webhook_client(stack, clock=clock) as api:
        event = await send(payload)
        card_key = str(event["card"])
        stored = stack.store.card_fields(card_key)
        assert stored is not None and stored.title == "Retry failed payouts with exponential backoff"
        payload["data"]["title"] = "Retry failed payouts, at most 3 attempts"
        payload["data"]["description"] = "Three attempts, then alert the on-call."
        payload["updatedFrom"]["stateId"] = "another-state"
        await send(payload)
    card = stack.store.card_fields(card_key)
    assert card is not None
    assert (card.title, card.body) == ("Retry failed payouts, at most 3 attempts",
                                       "Three attempts, then alert the on-call.")
