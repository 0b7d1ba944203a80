"""A card whose board id changes keeps its identity, through the real app, Temporal and store:
a Linear issue moved to another team (WEB-44 -> OPS-7 -> OPS-8) and a Jira issue moved to another
project (TEST-1 -> OPS-3) stay the card they were (same key, same running workflow, same history;
later deliveries, comments and API calls under the new id reach it); a Trello deleteCard naming the
card by its long id alone archives the card kept under its shortLink; the same ids in another
tenant lead nowhere; and ids that lead nowhere are answered as before."""

from __future__ import annotations

import asyncio
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
from tests.cardloop.app.boards.conftest import fixture_json
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)

WEB_44 = "default/linear/WEB-44"
WEB_44_UUID = "3443a709-f2b5-46f2-a136-a0445fd432be"
ACME_LINEAR = "acme-linear-secret-0123"


async def send(api: httpx.AsyncClient, clock: Clock, board: str, data: dict[str, Any],
               secret: str | None = None) -> dict[str, Any]:
    """The delivery signed as its board signs it, at the time it carries; the whole 200 answer."""
    body = json.dumps(data).encode()
    headers = {"content-type": "application/json"}
    if board == "linear":
        headers["linear-signature"] = linear_signature(body, *([secret] if secret else []))
        clock.now = data["webhookTimestamp"] / 1000 + 1
    elif board == "jira":
        headers["x-hub-signature"] = hub_signature(body)
        clock.now = data["timestamp"] / 1000 + 1
    else:
        headers["x-trello-webhook"] = trello_signature(body)
        clock.now = datetime.fromisoformat(data["action"]["date"]).timestamp() + 1
    r = await api.post(f"/webhooks/{board}", content=body, headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


def one(answer: dict[str, Any]) -> dict[str, Any]:
    [event] = answer["events"]
    return dict(event)


async def in_history(stack: Stack, key: str, text: str) -> list[str]:
    """The card's history once `text` joined it (the card's workflow appends what it took)."""
    for _ in range(300):
        history = [m.content for m in stack.store.messages(key)]
        if text in history:
            return history
        await asyncio.sleep(0.1)
    raise AssertionError(f"{text!r} never joined the history of {key}: {history}")


async def workflow_ids(stack: Stack) -> set[str]:
    return {wf.id async for wf in stack.client.list_workflows(f"TaskQueue = '{stack.task_queue}'")}


async def planning_running(stack: Stack, key: str) -> tuple[CardRef, str]:
    """The card's planning stage running (waiting on the delayed model) and its workflow's run id."""
    ref = CardRef.parse(key)
    await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
    return ref, (await stack.client.get_workflow_handle(ref.workflow_id).describe()).run_id


def team_move(state: str = "Todo") -> dict[str, Any]:
    """WEB-44 moved to team OPS as OPS-7, its state the new team's state of that name."""
    data = fixture_json("linear/recorded/issue_update_team.json")
    data["data"]["state"]["name"] = state
    return data


@pytest.mark.stack_env(**ENV)
async def test_a_linear_issue_moved_to_another_team_keeps_its_history_and_its_running_workflow(
        stack: Stack) -> None:
    clock = Clock(0)
    move = fixture_json("linear/recorded/issue_update_state.json")
    move["data"]["state"]["name"] = "Todo"   # planning: a text-only stage, held running by the model's delay
    stack.model.inject(delay=30.0)
    async with webhook_client(stack, clock=clock) as api:
        first = one(await send(api, clock, "linear", move))
        assert (first["card"], first["status"]) == (WEB_44, "accepted"), first
        ref, run_id = await planning_running(stack, WEB_44)
        await stack.cards.say(ref, "Keep the retry cap at 30s.", author="Priya", delivery_id="say-1")
        history = await in_history(stack, ref.key, "Keep the retry cap at 30s.")

        # Moved to team OPS: the delivery names OPS-7, a card cardloop never saw.
        moved = one(await send(api, clock, "linear", team_move()))
        assert (moved["card"], moved["board_card"], moved["status"]) == (WEB_44, "OPS-7", "accepted"), moved
        assert moved["workflow_id"] == ref.workflow_id and "OPS-7 is the card default/linear/WEB-44" in moved["renamed"]
        state = await stack.wait_state(ref, lambda s: s.status == "running")
        assert (state.stage, state.stage_runs) == ("planning", 1)   # the same stage run goes on
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        assert (await handle.describe()).run_id == run_id
        assert not any("OPS-7" in wf for wf in await workflow_ids(stack))
        assert stack.store.card_fields("default/linear/OPS-7") is None
        assert [m.content for m in stack.store.messages(ref.key)][:len(history)] == history
        card = stack.store.card_fields(ref.key)
        assert card is not None and card.url is not None and "/issue/OPS-7/" in card.url

        # A comment that names the issue only by its new identifier (its URL) joins that history.
        comment = fixture_json("linear/recorded/comment_create.json")
        comment["url"] = "https://linear.app/webhooks/issue/OPS-7/slug#comment-c7cafc52"
        comment["data"]["issue"]["id"] = comment["data"]["issueId"] = WEB_44_UUID
        comment["webhookTimestamp"] = move["webhookTimestamp"] + 60_000
        said = one(await send(api, clock, "linear", comment))
        assert (said["card"], said["status"]) == (WEB_44, "accepted"), said
        await in_history(stack, ref.key, comment["data"]["body"])

        # Moved again, with no state change this time (an edit): the newest id is the board's.
        again = team_move()
        again["data"].update(number=8, previousIdentifiers=["WEB-44", "OPS-7"], updatedAt="2023-04-11T10:25:00.000Z")
        again["updatedFrom"] = {"updatedAt": "2023-04-11T10:20:31.412Z", "number": 7, "previousIdentifiers": ["WEB-44"]}
        again["url"] = again["url"].replace("/OPS-7/", "/OPS-8/")
        again["createdAt"] = "2023-04-11T10:25:00.000Z"
        again["webhookTimestamp"] += 300_000
        edit = one(await send(api, clock, "linear", again))
        assert (edit["kind"], edit["card"], edit["status"]) == ("edit", WEB_44, "accepted"), edit
        assert stack.store.board_name(ref.key) == "OPS-8"
        assert stack.store.board_ids(ref.key).names == ("OPS-7", "OPS-8")
        assert (await handle.describe()).run_id == run_id

    # The API's card routes reach it by any of its ids: cancel its stage as OPS-8.
    token = stack.store.create_api_token("default", "t").token
    async with webhook_client(stack, clock=clock) as api:
        r = await api.post("/cards/linear/OPS-8/cancel", headers={"authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        assert (await api.post("/cards/linear/OPS-9/cancel",
                               headers={"authorization": f"Bearer {token}"})).status_code == 404
    state = await stack.wait_state(ref, lambda s: s.status == "idle" and bool(s.history))
    assert [(run.stage, run.outcome) for run in state.history] == [("planning", "cancelled")]


@pytest.mark.stack_env(**ENV)
async def test_a_trello_delete_naming_only_the_long_id_archives_the_right_card(stack: Stack) -> None:
    clock = Clock(0)
    delete = fixture_json("trello/recorded/delete_card_without_shortlink.json")
    archive = fixture_json("trello/recorded/update_card_archive.json")   # the same card, with its shortLink
    move = fixture_json("trello/recorded/update_card_move.json")
    move["action"]["data"]["listAfter"]["name"] = "To Do"   # planning
    move["action"]["data"]["card"] = {**archive["action"]["data"]["card"], "idList": "53582e2da0fac5676a71427a"}
    other = fixture_json("trello/recorded/update_card_move.json")   # another card of the board, done at once
    other["action"]["data"]["listAfter"]["name"] = "Done"
    async with webhook_client(stack, clock=clock) as api:
        # Nothing known yet under that long id: answered as before.
        unknown = one(await send(api, clock, "trello", delete))
        assert (unknown["card"], unknown["status"]) == ("default/trello/53582e2da0fac5676a71428b", "ignored")
        assert unknown["reason"] == "no card is known for 53582e2da0fac5676a71428b", unknown
        done = one(await send(api, clock, "trello", other))
        stack.model.inject(delay=30.0)
        moved = one(await send(api, clock, "trello", move))
        assert (moved["card"], moved["status"]) == ("default/trello/9BduUcVQ", "accepted"), moved
        ref, _ = await planning_running(stack, moved["card"])
        answer = one(await send(api, clock, "trello", delete))
        reason = "cancelled: the card was deleted on trello by TomaszKolek"
        assert (answer["card"], answer["board_card"], answer["status"], answer["reason"]) == (
            ref.key, "53582e2da0fac5676a71428b", "accepted", reason), answer
        state = await stack.wait_state(ref, lambda s: s.status == "idle" and bool(s.history))
        assert [(run.stage, run.outcome) for run in state.history] == [("planning", "cancelled")]
        gone = stack.store.card_gone(ref.key)
        assert gone is not None and gone[0] == "deleted on trello by TomaszKolek"
        assert stack.store.card_gone(done["card"]) is None   # the other card of the board is untouched
        assert (await send(api, clock, "trello", delete))["events"][0]["status"] == "duplicate"
    assert stack.store.card_fields("default/trello/53582e2da0fac5676a71428b") is None


@pytest.mark.stack_env(**ENV)
async def test_a_jira_issue_moved_to_another_project_keeps_its_card(stack: Stack) -> None:
    clock = Clock(0)
    move = fixture_json("jira/recorded/issue_updated_status.json")
    move["changelog"]["items"][-1]["toString"] = "To Do"   # planning
    stack.model.inject(delay=30.0)
    async with webhook_client(stack, clock=clock) as api:
        first = one(await send(api, clock, "jira", move))
        assert (first["card"], first["status"]) == ("default/jira/TEST-1", "accepted"), first
        ref, run_id = await planning_running(stack, first["card"])
        moved = one(await send(api, clock, "jira", fixture_json("jira/recorded/issue_updated_project_move.json")))
        assert (moved["kind"], moved["card"], moved["board_card"], moved["status"]) == (
            "edit", ref.key, "OPS-3", "accepted"), moved
        card = stack.store.card_fields(ref.key)
        assert card is not None and card.url == "https://zulipp.atlassian.net/browse/OPS-3"
        assert stack.store.board_name(ref.key) == "OPS-3"
        # A comment on OPS-3 joins TEST-1's history; its stage run goes on.
        comment = fixture_json("jira/recorded/comment_created.json")
        comment["issue"].update(key="OPS-3", id="10000", self="https://zulipp.atlassian.net/rest/api/2/issue/10000")
        comment["timestamp"] = move["timestamp"] + 120_000
        said = one(await send(api, clock, "jira", comment))
        assert (said["card"], said["status"]) == (ref.key, "accepted"), said
        await in_history(stack, ref.key, "Leaving a comment here! :)")
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        assert (await handle.describe()).run_id == run_id
        assert not any("OPS-3" in wf for wf in await workflow_ids(stack))
        await stack.cards.stop(ref, actor="test", reason="done with it", update_id="stop-1")


@pytest.mark.stack_env(**ENV, CARDLOOP_BOARDS__LINEAR__SECRETS='{ acme = "ACME_LINEAR_SECRET" }',
                       ACME_LINEAR_SECRET=ACME_LINEAR)
async def test_the_same_ids_in_another_tenant_lead_to_no_card_of_this_one(stack: Stack) -> None:
    clock = Clock(0)
    move = fixture_json("linear/recorded/issue_update_state.json")
    move["data"]["state"]["name"] = "Done"
    async with webhook_client(stack, clock=clock) as api:
        first = one(await send(api, clock, "linear", move))
        assert (first["card"], first["status"]) == (WEB_44, "accepted"), first
        assert stack.store.board_ids(WEB_44).uid == WEB_44_UUID
        # Tenant acme's delivery carries the same UUID and names WEB-44 as the former id: acme's own card.
        theirs = one(await send(api, clock, "linear", team_move("Done"), secret=ACME_LINEAR))
        assert (theirs["card"], theirs["status"]) == ("acme/linear/OPS-7", "accepted"), theirs
        assert "renamed" not in theirs and "board_card" not in theirs
    assert stack.store.stored_card_key("default/linear/OPS-7") is None
    assert stack.store.board_ids(WEB_44).names == ()
    assert stack.store.board_ids("acme/linear/OPS-7").uid == WEB_44_UUID
    await stack.cards.wait_for(CardRef.parse("acme/linear/OPS-7"), lambda s: s.status == "done", timeout=60)


@pytest.mark.stack_env(**ENV)
async def test_bad_or_missing_ids_are_answered_as_before(stack: Stack) -> None:
    clock = Clock(0)
    async with webhook_client(stack, clock=clock) as api:
        # No stable id at all (nor a former one): a new identifier is a new card, as it always was.
        move = team_move("Done")
        move["webhookId"] = "7c1f0e2d-4b3a-4e5f-8a9b-0c1d2e3f4a5b"   # labels the delivery, as Linear sends today
        del move["data"]["id"]
        move["data"]["previousIdentifiers"] = []
        answer = one(await send(api, clock, "linear", move))
        assert (answer["card"], answer["status"]) == ("default/linear/OPS-7", "accepted"), answer
        # A stable id that is no id is left out: the move is applied by its identifier.
        odd = team_move("Done")
        odd["webhookId"] = move["webhookId"]
        odd["data"].update(id={"not": "an id"}, number=9, previousIdentifiers=["WEB 44"])
        odd["webhookTimestamp"] += 1_000
        odd["createdAt"] = "2023-04-11T10:21:00.000Z"
        answer = one(await send(api, clock, "linear", odd))
        assert (answer["card"], answer["status"]) == ("default/linear/OPS-9", "accepted"), answer
        # An identifier no card key can hold is refused as before (400), whatever the ids beside it.
        bad = team_move("Done")
        bad["data"]["identifier"] = "OPS 7"
        body = json.dumps(bad).encode()
        clock.now = bad["webhookTimestamp"] / 1000 + 1
        r = await api.post("/webhooks/linear", content=body, headers={
            "content-type": "application/json", "linear-signature": linear_signature(body)})
        assert r.status_code == 400 and "OPS 7" in r.text, r.text
    await stack.cards.wait_for(CardRef.parse("default/linear/OPS-9"), lambda s: s.status == "done", timeout=60)
