"""A card edited on its board after cardloop first saw it, through the real app and Temporal: a
renamed title or an edited description that a later delivery carries reaches the stored card
(every stage turn reads its fields from the store), so the next stage works on what the card asks
today, not on what it asked when it was created. A card's repository and branch are where its
work was pushed: a card created without a repository gets the one the board links it to later,
but a card's repository is never switched under its pushed work."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from temporalio.client import WorkflowHandle

from cardloop.contracts.payloads import CardRef
from tests.cardloop.app.api.webhook_kit import (
    ENV,
    Clock,
    hub_signature,
    linear_signature,
    trello_signature,
    webhook_client,
)
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


@pytest.mark.stack_env(**ENV)
async def test_a_generic_edit_alone_changes_the_known_card_and_runs_nothing(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        unknown = await post_generic(api, card_id="EDIT-3", title="Nobody moved me", delivery_id="e-0")
        assert unknown["status"] == "ignored" and "no card is known" in str(unknown["reason"])
        await post_generic(api, card_id="EDIT-3", stage="done", delivery_id="e-1", title="First words")
        handle = stack.client.get_workflow_handle("card/default/generic/EDIT-3")
        await handle.result()  # the card is done: its run closed
        closed = await handle.describe()
        edit = dict(card_id="EDIT-3", title="Better words", body="Now with a description.", delivery_id="e-2")
        assert (await post_generic(api, **edit))["status"] == "accepted"
        assert (await post_generic(api, **edit))["status"] == "duplicate"
        same = await post_generic(api, card_id="EDIT-3", title="Better words", delivery_id="e-3")
        assert same["status"] == "ignored" and same["reason"] == "nothing the card keeps changed"
    card = stack.store.card_fields("default/generic/EDIT-3")
    assert card is not None and (card.title, card.body) == ("Better words", "Now with a description.")
    # An edit tells Temporal nothing: no run of the card's workflow was opened for it.
    latest = await handle.describe()
    assert (latest.run_id, latest.status) == (closed.run_id, closed.status)
    assert stack.store.card_fields("default/generic/EDIT-0") is None


@pytest.mark.stack_env(**ENV)
async def test_a_linear_trello_and_jira_rename_alone_reaches_the_card(stack: Stack) -> None:
    linear = fixture_json("linear/issue_update_state.json")
    trello = fixture_json("trello/update_card_move.json")
    jira = fixture_json("jira/issue_updated_status.json")
    # Each card is first moved to Done: an edit reaches only a card cardloop knows.
    linear["data"]["state"]["name"] = "Done"
    trello["action"]["data"]["listAfter"]["name"] = "Done"
    jira["changelog"]["items"][-1]["toString"] = "Done"
    clock = Clock(0)

    async def send(board: str, data: dict[str, object], now: float) -> dict[str, object]:
        body = json.dumps(data).encode()
        headers = {"content-type": "application/json"}
        if board == "linear":
            headers["linear-signature"] = linear_signature(body)
        elif board == "trello":
            headers["x-trello-webhook"] = trello_signature(body)
        else:
            headers["x-hub-signature"] = hub_signature(body)
        clock.now = now
        r = await api.post(f"/webhooks/{board}", content=body, headers=headers)
        assert r.status_code == 200, r.text
        [event] = r.json()["events"]
        return event

    renamed = "Retry failed payouts, at most 3 attempts"
    async with webhook_client(stack, clock=clock) as api:
        linear_now, trello_now, jira_now = linear["webhookTimestamp"] / 1000 + 1, 1741083335.0, 1741083335.0
        keys = [str((await send("linear", linear, linear_now))["card"]),
                str((await send("trello", trello, trello_now))["card"]),
                str((await send("jira", jira, jira_now))["card"])]
        # Linear: an issue update whose updatedFrom names the title, not the state.
        linear["updatedFrom"] = {"updatedAt": "2025-03-04T10:15:30.123Z", "title": linear["data"]["title"]}
        linear["data"]["title"] = renamed
        # Trello: updateCard with data.old.name (action_renamed_card), no lists.
        action = trello["action"]
        action["id"] = "67c6d5e2f1a2b3c4d5e6f799"
        action["data"] = {"card": {**action["data"]["card"], "name": renamed},
                          "old": {"name": action["data"]["card"]["name"]}, "board": action["data"]["board"]}
        # Jira: a changelog naming the summary only.
        jira["changelog"] = {"id": "10533", "items": [{"field": "summary", "fieldtype": "jira", "fieldId": "summary",
                                                       "fromString": jira["issue"]["fields"]["summary"],
                                                       "toString": renamed}]}
        jira["issue"]["fields"]["summary"] = renamed
        jira["timestamp"] += 1000
        edits = [await send("linear", linear, linear_now), await send("trello", trello, trello_now),
                 await send("jira", jira, jira_now)]
    for key, edit in zip(keys, edits, strict=True):
        assert (edit["kind"], edit["status"]) == ("edit", "accepted"), edit
        card = stack.store.card_fields(key)
        assert card is not None and card.title == renamed, key


async def memo_title(handle: WorkflowHandle, want: str, timeout: float = 30.0) -> dict[str, object]:
    """The run's memo once its title is `want` (a signal's effect is seen after its workflow task)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        memo = dict(await (await handle.describe()).memo())
        if memo.get("title") == want or asyncio.get_running_loop().time() > deadline:
            return memo
        await asyncio.sleep(0.1)


@pytest.mark.stack_env(**ENV)
async def test_a_rename_while_the_card_runs_reaches_the_memo_the_temporal_ui_lists(stack: Stack) -> None:
    stack.model.inject(delay=30.0)  # the planning stage stays running, its run open
    token = "ghp_" + "R8f2kLq9Xz3Vb7Nm1Tc5Wd4Yh6Js0Pa2Ue8G"
    async with webhook_client(stack) as api:
        moved = await post_generic(api, card_id="EDIT-4", stage="planning", delivery_id="e-1",
                                   title="Rotate the keys")
        ref = CardRef.parse(str(moved["card"]))
        await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        assert (await (await handle.describe()).memo())["title"] == "Rotate the keys"
        renamed = f"Rotate the keys, {token} leaked"
        edit = await post_generic(api, card_id="EDIT-4", title=renamed, url="https://boards.example/EDIT-4",
                                  delivery_id="e-2")
        assert edit["status"] == "accepted", edit
        memo = await memo_title(handle, "Rotate the keys, [REDACTED:github-token] leaked")
    # Redacted as the memo's title always is; the run that took it is the one still running.
    assert memo == {"title": "Rotate the keys, [REDACTED:github-token] leaked", "url": "https://boards.example/EDIT-4"}
    assert token not in str(memo)
    state = await stack.cards.state(ref)
    assert state is not None and state.status == "running"
