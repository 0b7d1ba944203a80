"""A card archived or deleted on its board, through the real app and Temporal: its running stage
is cancelled as `card cancel` does (history kept, the card still in the store), with who did it
and what in the run's reason; a card with nothing running is told so and nothing starts; a
redelivery is a duplicate; an unknown card is ignored; and a card un-archived and moved again
runs as any move."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cardloop.contracts.payloads import CardRef, CardState
from cardloop.prompts.card import Card
from tests.cardloop.app.api.webhook_kit import (
    ENV,
    Clock,
    at,
    hub_signature,
    linear_signature,
    trello_signature,
    webhook_client,
)
from tests.cardloop.app.boards.conftest import FakeGitHub, fixture_json
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)

ARCHIVED_ISSUE = "I_kwDOCG5vGM5La0aB"   # the content_node_id of GitHub's real archived example


async def send(api: httpx.AsyncClient, clock: Clock, board: str, data: dict[str, Any], now: float,
               **extra_headers: str) -> dict[str, Any]:
    """The delivery signed as its board signs it, at `now`; its one event's answer."""
    body = json.dumps(data).encode()
    headers = {"content-type": "application/json", **extra_headers}
    if board == "linear":
        headers["linear-signature"] = linear_signature(body)
    elif board == "trello":
        headers["x-trello-webhook"] = trello_signature(body)
    elif board == "jira":
        headers["x-hub-signature"] = hub_signature(body)
    else:
        headers["x-hub-signature-256"] = hub_signature(body)
    clock.now = now
    r = await api.post(f"/webhooks/{board}", content=body, headers=headers)
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    return dict(event)


async def running(stack: Stack, key: str) -> CardRef:
    """The card's planning stage running, waiting on the (delayed) model."""
    ref = CardRef.parse(key)
    await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
    return ref


async def cancelled(stack: Stack, ref: CardRef, reason: str) -> CardState:
    state = await stack.wait_state(ref, lambda s: s.status == "idle" and bool(s.history))
    assert [(r.stage, r.outcome) for r in state.history] == [("planning", "cancelled")]
    assert state.history[-1].reason == f"{reason}; its work is kept"
    # The card is not deleted: its history and costs stay for `card show`.
    assert stack.store.card_fields(ref.key) is not None
    return state


@pytest.mark.stack_env(**ENV)
async def test_a_trello_card_archived_mid_stage_stops_it_and_moves_again_after(stack: Stack) -> None:
    move = fixture_json("trello/update_card_move.json")
    move["action"]["data"]["listAfter"]["name"] = "To Do"     # planning: a text-only stage
    archive = fixture_json("trello/update_card_archive.json")
    now = at("2025-03-04T10:31:05+00:00")
    clock = Clock(now)
    stack.model.inject(delay=30.0)   # planning waits on the model while the card is archived
    async with webhook_client(stack, clock=clock) as api:
        unknown = await send(api, clock, "trello", archive, now)
        assert unknown["status"] == "ignored" and "no card is known" in unknown["reason"], unknown
        moved = await send(api, clock, "trello", move, now)
        assert moved["status"] == "accepted", moved
        ref = await running(stack, str(moved["card"]))
        answer = await send(api, clock, "trello", archive, now)
        reason = "cancelled: the card was archived on trello by Priya Raman"
        assert (answer["kind"], answer["status"], answer["reason"]) == ("archive", "accepted", reason), answer
        await cancelled(stack, ref, reason)
        assert (await send(api, clock, "trello", archive, now))["status"] == "duplicate"
        # `card show` and `card list` read the mark until the card moves again.
        marked = stack.store.card_gone(ref.key)
        assert marked is not None and marked[0] == "archived on trello by Priya Raman"
        # Un-archived (asks nothing), then moved again: the move runs as any move.
        restore = json.loads(json.dumps(archive))
        restore["action"]["id"] = "67c6db00f1a2b3c4d5e6f8c3"
        restore["action"]["data"]["old"] = {"closed": True}
        restore["action"]["data"]["card"]["closed"] = False
        body = json.dumps(restore).encode()
        r = await api.post("/webhooks/trello", content=body, headers={
            "content-type": "application/json", "x-trello-webhook": trello_signature(body)})
        assert r.status_code == 200 and r.json()["status"] == "ignored", r.text
        again = json.loads(json.dumps(move))
        again["action"]["id"] = "67c6db40f1a2b3c4d5e6f8d4"
        again["action"]["date"] = "2025-03-04T10:31:04.000Z"
        assert (await send(api, clock, "trello", again, now))["status"] == "accepted"
        state = await stack.wait_state(ref, lambda s: len(s.history) >= 2)
        assert state.history[1].stage == "planning" and state.history[1].outcome != "cancelled"
    assert stack.store.card_gone(ref.key) is None  # moved again: back on the board


@pytest.mark.stack_env(**ENV)
async def test_a_card_with_no_stage_running_is_told_so_and_nothing_starts(stack: Stack) -> None:
    move = fixture_json("trello/update_card_move.json")
    move["action"]["data"]["listAfter"]["name"] = "Done"
    delete = fixture_json("trello/delete_card.json")
    now = at("2025-03-04T10:34:00+00:00")
    clock = Clock(now)
    async with webhook_client(stack, clock=clock) as api:
        moved = await send(api, clock, "trello", move, now)
        ref = CardRef.parse(str(moved["card"]))
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        await handle.result()   # the card is done: its run closed
        closed = await handle.describe()
        answer = await send(api, clock, "trello", delete, now)
        assert (answer["status"], answer["reason"]) == ("ignored", "deleted; no stage was running"), answer
        assert (await send(api, clock, "trello", delete, now))["status"] == "duplicate"
    latest = await handle.describe()
    assert (latest.run_id, latest.status) == (closed.run_id, closed.status)   # nothing started
    assert stack.store.card_fields(ref.key) is not None
    # Nothing ran, but the card is gone from its board all the same: `card show` says so.
    marked = stack.store.card_gone(ref.key)
    assert marked is not None and marked[0].startswith("deleted on trello")


@pytest.mark.stack_env(**ENV)
async def test_a_linear_issue_deleted_or_archived_and_a_jira_issue_deleted_stop_their_stage(stack: Stack) -> None:
    clock = Clock(0)
    async with webhook_client(stack, clock=clock) as api:
        # Linear: the issue deleted (action "remove").
        move = fixture_json("linear/issue_update_state.json")
        move["data"]["state"]["name"] = "Todo"
        stack.model.inject(delay=30.0)
        moved = await send(api, clock, "linear", move, move["webhookTimestamp"] / 1000 + 1)
        ref = await running(stack, str(moved["card"]))
        remove = fixture_json("linear/issue_remove.json")
        answer = await send(api, clock, "linear", remove, remove["webhookTimestamp"] / 1000 + 1,
                            **{"linear-delivery": "ld-remove"})
        reason = "cancelled: the card was deleted on linear by Priya Raman"
        assert (answer["status"], answer["reason"]) == ("accepted", reason), answer
        await cancelled(stack, ref, reason)
        # Linear: another issue archived (an update setting archivedAt).
        other = json.loads(json.dumps(move))
        other["data"]["identifier"] = "ENG-124"
        other["data"]["id"] = "5e0c9a4b-2d1f-4e8a-b7c6-3f9d0e1a2b4c"   # another issue: its own UUID
        other["webhookId"] = "0b3f4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c7e"
        stack.model.inject(delay=30.0)
        moved = await send(api, clock, "linear", other, other["webhookTimestamp"] / 1000 + 1)
        ref = await running(stack, str(moved["card"]))
        archive = json.loads(json.dumps(other))
        archive["createdAt"] = archive["data"]["archivedAt"] = "2025-03-04T10:31:02.118Z"
        archive["updatedFrom"] = {"updatedAt": "2025-03-04T10:15:30.123Z", "archivedAt": None}
        answer = await send(api, clock, "linear", archive, archive["webhookTimestamp"] / 1000 + 2)
        reason = "cancelled: the card was archived on linear by Priya Raman"
        assert (answer["status"], answer["reason"]) == ("accepted", reason), answer
        await cancelled(stack, ref, reason)
        # Jira: jira:issue_deleted.
        move = fixture_json("jira/issue_updated_status.json")
        move["changelog"]["items"][-1]["toString"] = "To Do"
        stack.model.inject(delay=30.0)
        now = move["timestamp"] / 1000 + 1000
        moved = await send(api, clock, "jira", move, now)
        ref = await running(stack, str(moved["card"]))
        answer = await send(api, clock, "jira", fixture_json("jira/issue_deleted.json"), now)
        reason = "cancelled: the card was deleted on jira by Priya Raman"
        assert (answer["status"], answer["reason"]) == ("accepted", reason), answer
        await cancelled(stack, ref, reason)


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_a_github_project_item_archived_stops_its_issues_stage(stack: Stack) -> None:
    github = FakeGitHub()
    github.nodes[ARCHIVED_ISSUE] = {"__typename": "Issue", "number": 142,
                                    "repository": {"nameWithOwner": "Octocoders/payments"}}
    config = stack.config.model_copy(update={"boards": {**stack.config.boards, "github": stack.config.board(
        "github").model_copy(update={"graphql_url": github.url})}})
    archived = fixture_json("github/projects_v2_item.archived.json")
    now = at("2022-06-08T21:19:40+00:00")
    clock = Clock(now)
    try:
        async with webhook_client(stack, config=config, clock=clock) as api:
            hdrs = {"x-github-event": "projects_v2_item", "x-github-delivery": "gh-archive-1"}
            unknown = await send(api, clock, "github", archived, now, **hdrs)
            assert unknown["status"] == "ignored" and "no card is known" in unknown["reason"], unknown
            # The issue's card, running planning (moved there as the board's move would).
            card = Card.model_validate({"id": "Octocoders/payments#142", "tenant": "default", "board": "github",
                                        "title": "Retry failed payouts", "repo": "Octocoders/payments"})
            ref = stack.cards.import_card(card)
            stack.model.inject(delay=30.0)
            await stack.cards.move(ref, "planning", delivery_id="gh-move")
            await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
            archived["projects_v2_item"]["updated_at"] = "2022-06-08T21:19:36Z"   # a new event
            answer = await send(api, clock, "github", archived, now, **{**hdrs, "x-github-delivery": "gh-archive-2"})
            reason = "cancelled: the card was archived on github by Codertocat"
            assert (answer["card"], answer["status"], answer["reason"]) == (ref.key, "accepted", reason), answer
            await cancelled(stack, ref, reason)
    finally:
        github.close()


@pytest.mark.stack_env(**ENV)
async def test_a_generic_card_gone_stops_its_stage(stack: Stack) -> None:
    clock = Clock(0)
    async with webhook_client(stack, clock=clock) as api:
        stack.model.inject(delay=30.0)
        moved = await send(api, clock, "generic", {"card_id": "OPS-GONE", "stage": "planning", "delivery_id": "g-1",
                                                   "title": "Rotate the keys"}, 0)
        ref = await running(stack, str(moved["card"]))
        gone = {"card_id": "OPS-GONE", "gone": "archived", "actor": "sam", "delivery_id": "g-2"}
        answer = await send(api, clock, "generic", gone, 0)
        reason = "cancelled: the card was archived on generic by sam"
        assert (answer["kind"], answer["status"], answer["reason"]) == ("archive", "accepted", reason), answer
        await cancelled(stack, ref, reason)
        assert (await send(api, clock, "generic", gone, 0))["status"] == "duplicate"
