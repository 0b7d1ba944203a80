"""A board's card fields, through the real app and Temporal: the generic webhook accepts exactly
what a card can keep (one definition, prompts/card.py), so what it accepted is never refused
later with pydantic's text and the move lost; a value it cannot keep is a 400 naming the field in
the route's words. A board value over a card's limit that the sender cannot change (a GitHub pull
request's long head branch, a long title) never costs the move: the title is cut, the branch left
out, and the answer says so. The same for a long display name or list name: cut, the move kept."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cardloop.app.api.webhooks import card_ref, new_card
from cardloop.app.boards.events import BoardEvent
from cardloop.app.boards.generic import generic_event_schema
from cardloop.contracts.errors import InputError
from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import MAX_BRANCH, MAX_TITLE, REPO_RULE, card_json_schema
from tests.cardloop.app.api.webhook_kit import (
    ENV,
    Clock,
    at,
    generic,
    hub_signature,
    trello_signature,
    webhook_client,
)
from tests.cardloop.app.boards.conftest import FakeGitHub, fixture_json
from tests.cardloop.app.boards.github_payloads import DONE, FIELD, ITEM, PULL, STATUS_FIELD, item_node, moved
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)


async def post(api: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await api.post("/webhooks/generic", content=body, headers={
        "content-type": "application/json", "x-hub-signature-256": hub_signature(body)})


def plain_words(detail: str, *sent: str) -> None:
    """The route's own words: no pydantic dump, no link to its site, none of the values sent."""
    assert "validation error" not in detail and "errors.pydantic.dev" not in detail, detail
    assert "input_value" not in detail and "For further information" not in detail, detail
    for value in sent:
        assert value not in detail, detail


@pytest.mark.stack_env(**ENV)
async def test_card_fields_the_card_cannot_keep_are_a_400_naming_the_field(stack: Stack) -> None:
    long_branch = "feature/" + "b" * 282   # 290: the generic schema allowed 300, a card keeps 255
    cases = [("R-1", {"repo": "infra"}, "repo", REPO_RULE),
             ("R-2", {"branch": long_branch}, "branch", f"String should have at most {MAX_BRANCH} characters"),
             ("R-3", {"repo": "bad repo/x"}, "repo", REPO_RULE)]
    async with webhook_client(stack) as api:
        for card_id, fields, field, says in cases:
            body = generic(card_id, "planning", f"d-{card_id}", **fields)
            r = await post(api, body)
            assert r.status_code == 400, (card_id, r.text)
            detail = r.json()["detail"]
            assert detail.startswith("not a generic card event: ") and f"{field}: {says}" in detail, detail
            plain_words(detail, *fields.values())
            assert stack.store.card_fields(f"default/generic/{card_id}") is None
    started = [wf.id async for wf in stack.client.list_workflows(f"TaskQueue = '{stack.task_queue}'")]
    assert started == []


@pytest.mark.stack_env(**ENV)
async def test_a_branch_at_the_cards_limit_is_kept_and_the_move_runs(stack: Stack) -> None:
    branch = "feature/" + "b" * (MAX_BRANCH - 8)
    body = generic("R-4", "done", "d-r4", branch=branch, repo="acme/infra")
    async with webhook_client(stack) as api:
        r = await post(api, body)
    assert r.status_code == 200, r.text
    assert r.json()["events"][0]["status"] == "accepted" and "note" not in r.json()["events"][0]
    card = stack.store.card_fields("default/generic/R-4")
    assert card is not None and card.branch == branch and card.repo == "acme/infra"


def limits(field: dict[str, Any]) -> dict[str, Any]:
    """A string field's length and pattern in a JSON schema, optional (anyOf with null) or not."""
    [text] = [f for f in field.get("anyOf", [field]) if f.get("type") == "string"]
    return {k: text.get(k) for k in ("maxLength", "pattern")}


def test_the_generic_schema_has_the_cards_limits() -> None:
    ours, cards = generic_event_schema()["properties"], card_json_schema()["properties"]
    for field in ("title", "url", "repo", "branch"):
        assert limits(ours[field]) == limits(cards[field]), field


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_a_pull_requests_long_branch_and_title_never_cost_the_move(stack: Stack) -> None:
    github = FakeGitHub()
    branch = "renovate/" + "/".join(["group-of-dependency-updates-for-the-payments-service"] * 6)
    title = "Bump " + "a-very-long-package-name " * 60
    assert len(branch) > MAX_BRANCH and len(title) > MAX_TITLE
    github.nodes[FIELD] = STATUS_FIELD
    github.nodes[ITEM] = item_node({**PULL, "headRefName": branch, "title": title}, status="Done")
    config = stack.config.model_copy(update={"boards": {**stack.config.boards, "github": stack.config.board(
        "github").model_copy(update={"graphql_url": github.url})}})
    body = moved(to=DONE)
    try:
        async with webhook_client(stack, config=config, clock=Clock(at("2022-06-08T20:34:26Z"))) as api:
            r = await api.post("/webhooks/github", content=body, headers={
                "x-github-event": "projects_v2_item", "x-github-delivery": "gh-long",
                "x-hub-signature-256": hub_signature(body), "content-type": "application/json"})
    finally:
        github.close()
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert event["status"] == "accepted" and event["stage"] == "done"
    assert event["note"] == (f"the branch ({len(branch)} characters, a card keeps {MAX_BRANCH}) was left out: "
                             "the card works on a branch of its own")
    card = stack.store.card_fields(event["card"])
    assert card is not None and card.title == title[:MAX_TITLE] and card.branch is None
    assert card.repo == "Octocoders/payments" and card.url == PULL["url"]
    await stack.cards.wait_for(CardRef.parse(event["card"]), lambda s: s.status == "done", timeout=60)


@pytest.mark.stack_env(**ENV)
async def test_a_jira_display_name_over_an_actors_limit_is_cut_not_the_move_lost(stack: Stack) -> None:
    payload = fixture_json("jira/issue_updated_status.json")
    payload["user"]["displayName"] = "Priya " * 60   # 360 characters: a move carries 200
    payload["changelog"]["items"][-1]["toString"] = "Done"
    body = json.dumps(payload).encode()
    async with webhook_client(stack, clock=Clock(payload["timestamp"] / 1000)) as api:
        r = await api.post("/webhooks/jira", content=body, headers={
            "content-type": "application/json", "x-hub-signature": hub_signature(body)})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert event["status"] == "accepted" and event["stage"] == "done"


@pytest.mark.stack_env(**ENV)
async def test_a_move_out_of_a_trello_list_with_a_long_name_still_runs(stack: Stack) -> None:
    payload = fixture_json("trello/update_card_move.json")
    payload["action"]["data"]["listBefore"]["name"] = "Ideas " * 500   # Trello keeps 16,384 characters
    payload["action"]["data"]["listAfter"]["name"] = "Done"
    body = json.dumps(payload).encode()
    async with webhook_client(stack, clock=Clock(at(payload["action"]["date"]))) as api:
        r = await api.post("/webhooks/trello", content=body, headers={
            "content-type": "application/json", "x-trello-webhook": trello_signature(body)})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert event["status"] == "accepted" and event["stage"] == "done"


def test_a_card_the_board_describes_wrongly_is_an_input_error_in_the_routes_words() -> None:
    event = BoardEvent(kind="transition", board="github", tenant="default", card_id="acme#1", delivery_id="d",
                       to_column="Done", stage="done", repo="not a repo")
    with pytest.raises(InputError) as refused:
        new_card(event, card_ref(event))
    assert str(refused.value) == f"card 'acme#1' cannot be created from this delivery: repo: {REPO_RULE}"
