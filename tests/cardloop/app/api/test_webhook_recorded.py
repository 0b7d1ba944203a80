"""Payloads Linear, Jira and Trello really sent (tests/fixtures/*/recorded), byte for byte, through
the real app and Temporal: a recorded move reaches its card; what a real board also sends for
every other edit (a Linear label change, a Jira priority change, a Trello card moved within its
list or un-archived, a comment on a document, a comment without its issue) is a 200 "ignored"
with the reason, and no workflow starts or runs again for any of it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import httpx
import pytest

from cardloop.contracts.payloads import CardRef
from tests.cardloop.app.api.webhook_kit import (
    ENV,
    Clock,
    hub_signature,
    linear_signature,
    trello_signature,
    webhook_client,
)
from tests.cardloop.app.boards.conftest import fixture_bytes
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)


async def deliver(api: httpx.AsyncClient, clock: Clock, path: str) -> dict[str, Any]:
    """The recorded bytes signed as the board signs them, at the time the board sent them: the 200 answer."""
    board = path.split("/", 1)[0]
    body = fixture_bytes(path)
    data = json.loads(body)
    headers = {"content-type": "application/json"}
    if board == "linear":
        headers["linear-signature"] = linear_signature(body)
        clock.now = data["webhookTimestamp"] / 1000
    elif board == "jira":
        headers["x-hub-signature"] = hub_signature(body)
        clock.now = data["timestamp"] / 1000
    else:
        headers["x-trello-webhook"] = trello_signature(body)
        clock.now = datetime.fromisoformat(data["action"]["date"]).timestamp()
    r = await api.post(f"/webhooks/{board}", content=body, headers=headers)
    assert r.status_code == 200, (path, r.text)
    return dict(r.json())


def event(answer: dict[str, Any]) -> tuple[str, str, str]:
    [one] = answer["events"]
    return one["kind"], one["status"], one.get("reason", "")


async def workflows(stack: Stack) -> list[tuple[str, str]]:
    return sorted([(wf.id, wf.run_id) async for wf in stack.client.list_workflows(f"TaskQueue = '{stack.task_queue}'")])


async def moved_and_done(stack: Stack, api: httpx.AsyncClient, clock: Clock, path: str, card: str) -> None:
    answer = await deliver(api, clock, path)
    assert event(answer)[:2] == ("transition", "accepted"), answer
    ref = CardRef.parse(card)
    await stack.client.get_workflow_handle(ref.workflow_id).result()   # "done": no stage to run


@pytest.mark.stack_env(**ENV, CARDLOOP_BOARDS__LINEAR__COLUMNS='{ "In Progress" = "done" }')
async def test_linear_recorded_payloads(stack: Stack) -> None:
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock) as api:
        await moved_and_done(stack, api, clock, "linear/recorded/issue_update_state.json", "default/linear/WEB-44")
        before = await workflows(stack)
        labels = await deliver(api, clock, "linear/recorded/issue_update_labels.json")
        assert labels == {"status": "ignored",
                          "reason": "Linear issue update did not change its state, title, description or team"}
        # The title edit names the title the move already stored: an edit, nothing to change.
        assert event(await deliver(api, clock, "linear/recorded/issue_update_title.json")) == (
            "edit", "ignored", "nothing the card keeps changed")
        document = await deliver(api, clock, "linear/recorded/comment_on_document.json")
        assert document["status"] == "ignored" and "comments on issues" in document["reason"]
        assert event(await deliver(api, clock, "linear/recorded/comment_create.json")) == (
            "comment", "ignored", "no card is known for WEB-46 yet: move it first")
        assert event(await deliver(api, clock, "linear/recorded/issue_remove.json")) == (
            "archive", "ignored", "deleted; no stage was running")
        assert await workflows(stack) == before   # nothing started, nothing ran again
    card = stack.store.card_fields("default/linear/WEB-44")
    assert card is not None and card.title.startswith("This is regarding the outage that we faced on 11/12/22")
    assert card.url == ("https://linear.app/webhooks/issue/WEB-44/"
                        "this-is-regarding-the-outage-that-we-faced-on-111222-from-2000-to-2200")
    assert stack.store.card_gone("default/linear/WEB-44") is not None   # `card show` says it was deleted


@pytest.mark.stack_env(**ENV, CARDLOOP_BOARDS__JIRA__COLUMNS='{ "In Progress" = "done" }')
async def test_jira_recorded_payloads(stack: Stack) -> None:
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock) as api:
        await moved_and_done(stack, api, clock, "jira/recorded/issue_updated_status.json", "default/jira/TEST-1")
        before = await workflows(stack)
        priority = await deliver(api, clock, "jira/recorded/issue_updated_priority.json")   # TEST-1's priority
        assert priority == {"status": "ignored",
                            "reason": "Jira issue update did not change its status, summary, description or project"}
        alone = await deliver(api, clock, "jira/recorded/comment_created_without_issue.json")
        assert alone["status"] == "ignored" and "without its issue" in alone["reason"]
        assert event(await deliver(api, clock, "jira/recorded/comment_created.json")) == (
            "comment", "ignored", "no card is known for ZUL-1 yet: move it first")
        assert event(await deliver(api, clock, "jira/recorded/issue_deleted.json")) == (
            "archive", "ignored", "no card is known for BUG-15")
        assert await workflows(stack) == before
    card = stack.store.card_fields("default/jira/TEST-1")
    assert card is not None and (card.title, card.url) == ("Fix That", "https://zulipp.atlassian.net/browse/TEST-1")


@pytest.mark.stack_env(**ENV, CARDLOOP_BOARDS__TRELLO__COLUMNS='{ Intermediate = "done" }')
async def test_trello_recorded_payloads(stack: Stack) -> None:
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock) as api:
        await moved_and_done(stack, api, clock, "trello/recorded/update_card_move.json", "default/trello/r33ylX2Z")
        before = await workflows(stack)
        ignored = ("Trello card update was not a move between lists, an archive, a rename or a description edit")
        for path in ("trello/recorded/update_card_pos.json", "trello/recorded/update_card_reopen.json"):
            assert await deliver(api, clock, path) == {"status": "ignored", "reason": ignored}
        assert event(await deliver(api, clock, "trello/recorded/update_card_desc.json")) == (
            "edit", "ignored", "no card is known for P2r0z66z")
        assert event(await deliver(api, clock, "trello/recorded/comment_card.json")) == (
            "comment", "ignored", "no card is known for xPKXoSTQ yet: move it first")
        for path, card in (("trello/recorded/update_card_archive.json", "9BduUcVQ"),
                           ("trello/recorded/delete_card.json", "Rwk4EVy0")):
            assert event(await deliver(api, clock, path)) == ("archive", "ignored", f"no card is known for {card}")
        assert await workflows(stack) == before
    card = stack.store.card_fields("default/trello/r33ylX2Z")
    assert card is not None and (card.title, card.url) == ("This is a card.", "https://trello.com/c/r33ylX2Z")
