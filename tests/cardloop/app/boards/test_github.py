"""The GitHub adapter on octokit's real payload examples, with item resolution through a loopback
server that speaks GitHub's GraphQL response shape."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cardloop.app.boards.adapters import build_adapters
from cardloop.app.boards.cache import TTLCache
from cardloop.app.boards.events import BoardEvent, Ignored, WebhookError
from cardloop.app.boards.github import GitHubAdapter, build_query
from cardloop.contracts.config import Config
from tests.cardloop.app.boards.github_payloads import (
    DONE,
    DRAFT,
    FIELD,
    IN_PROGRESS,
    ISSUE,
    ITEM,
    PARKED,
    PULL,
    STATUS_FIELD,
    TODO,
    headers,
    item_node,
    moved,
)

from .conftest import TOKEN, FakeGitHub, fixture_bytes, fixture_json, make_config


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def config(github_api: FakeGitHub) -> Config:
    return make_config(graphql_url=github_api.url)


@pytest.fixture
async def adapter(config: Config, clock: Clock) -> AsyncIterator[GitHubAdapter]:
    async with httpx.AsyncClient() as http:
        adapters = build_adapters(config, http, clock=clock)
        github = adapters["github"]
        assert isinstance(github, GitHubAdapter)
        yield github


async def parse(adapter: GitHubAdapter, event: str, body: bytes, delivery: str = "d-1") -> list[BoardEvent] | Ignored:
    return await adapter.parse(headers(event, delivery), body)


async def fails(adapter: GitHubAdapter, event: str, body: bytes, status: int, hdrs: httpx.Headers | None = None,
                ) -> str:
    with pytest.raises(WebhookError) as info:
        await adapter.parse(hdrs if hdrs is not None else headers(event), body)
    assert info.value.status == status, info.value.message
    return info.value.message


# -- projects_v2_item -----------------------------------------------------------------------------

async def test_real_example_resolves_field_and_live_value_through_graphql(
        adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    # octokit's example is the older payload shape: no `to`, a DraftIssue item. The column comes
    # from the item's current field value, looked up live.
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(DRAFT, status="In Progress")}
    result = await adapter.parse(headers("projects_v2_item"), fixture_bytes("github/projects_v2_item.edited.json"))
    assert result == [BoardEvent(
        kind="transition", board="github", tenant="octo", card_id=ITEM,
        delivery_id="72d3162e-cc78-11e3-81ab-4c9367dc0958", from_column=None, to_column="In Progress",
        stage="coding", title="Spike: idempotency keys", body="Find out what the bank keeps.", url=None,
        repo=None, branch=None, actor="wolfy1339", comment=None)]
    [request] = github_api.requests
    assert request["authorization"] == f"bearer {TOKEN}"
    assert request["variables"] == {"field": FIELD, "item": ITEM}
    assert "fieldValues" in request["query"] and "ProjectV2SingleSelectField" in request["query"]


async def test_option_ids_resolve_to_names_and_an_issue_to_its_card_id(
        adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE, status="anything: not read")}
    result = await parse(adapter, "projects_v2_item", moved(to=IN_PROGRESS, frm=TODO), "d-7")
    assert result == [BoardEvent(
        kind="transition", board="github", tenant="octo", card_id="Octocoders/payments#142", delivery_id="d-7",
        from_column="Todo", to_column="In Progress", stage="coding", title="Retry failed payouts with backoff",
        body="Payouts failing with a 5xx are dropped.", url="https://github.com/Octocoders/payments/issues/142",
        repo="Octocoders/payments", branch=None, actor="wolfy1339", board_item=ITEM)]   # the item leads to the card too


async def test_pull_request_item_carries_its_branch(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(PULL)}
    [event] = await parse(adapter, "projects_v2_item", moved(to=DONE, frm=None))
    assert isinstance(event, BoardEvent)
    assert (event.card_id, event.branch, event.from_column, event.to_column, event.stage) == (
        "Octocoders/payments#7", "priya/payout-backoff", None, "Done", "done")


async def test_a_burst_costs_one_query(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    first = await parse(adapter, "projects_v2_item", moved(to=IN_PROGRESS), "d-1")
    second = await parse(adapter, "projects_v2_item", moved(to=DONE, frm=IN_PROGRESS), "d-2")
    assert len(github_api.requests) == 1
    assert [e.to_column for e in first + second] == ["In Progress", "Done"]
    assert [e.delivery_id for e in first + second] == ["d-1", "d-2"]


async def test_concurrent_deliveries_share_one_request(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    results = await asyncio.gather(*(parse(adapter, "projects_v2_item", moved(), f"d-{i}") for i in range(8)))
    assert len(github_api.requests) == 1
    assert {r[0].card_id for r in results} == {"Octocoders/payments#142"}


async def test_cache_entries_expire(adapter: GitHubAdapter, github_api: FakeGitHub, clock: Clock) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    await parse(adapter, "projects_v2_item", moved())
    clock.now += 299
    await parse(adapter, "projects_v2_item", moved())
    assert len(github_api.requests) == 1
    clock.now += 2
    github_api.nodes[ITEM] = item_node({**ISSUE, "title": "Renamed"})
    [event] = await parse(adapter, "projects_v2_item", moved())
    assert len(github_api.requests) == 2
    assert isinstance(event, BoardEvent) and event.title == "Renamed"


async def test_legacy_payloads_always_read_the_live_value(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    # Without `to` the column is the item's current value, which a cache could hold stale.
    body = fixture_bytes("github/projects_v2_item.edited.json")
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE, status="In Progress")}
    [first] = await parse(adapter, "projects_v2_item", body, "d-1")
    github_api.nodes[ITEM] = item_node(ISSUE, status="Done")
    [second] = await parse(adapter, "projects_v2_item", body, "d-2")
    assert (first.to_column, second.to_column) == ("In Progress", "Done")
    assert [r["variables"] for r in github_api.requests] == [{"field": FIELD, "item": ITEM}, {"item": ITEM}]


async def test_an_option_added_after_caching_refreshes_the_field(adapter: GitHubAdapter,
                                                                 github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    await parse(adapter, "projects_v2_item", moved())
    github_api.nodes[FIELD] = {**STATUS_FIELD, "options": [*STATUS_FIELD["options"], {"id": "c0ffee00",
                                                                                     "name": "In Review"}]}
    [event] = await parse(adapter, "projects_v2_item", moved(to="c0ffee00", frm=IN_PROGRESS))
    assert isinstance(event, BoardEvent) and (event.to_column, event.stage) == ("In Review", "review")
    assert [r["variables"] for r in github_api.requests] == [{"field": FIELD, "item": ITEM}, {"field": FIELD}]


async def test_unknown_option_falls_back_to_the_payload_name_else_400(
        adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    body = json.loads(moved(to="feedface"))
    body["changes"]["field_value"]["to"]["name"] = "Testing"
    [event] = await parse(adapter, "projects_v2_item", json.dumps(body).encode())
    assert isinstance(event, BoardEvent) and (event.to_column, event.stage) == ("Testing", "testing")
    message = await fails(adapter, "projects_v2_item", moved(to="deadbeef"), 400)
    assert "'deadbeef' is not an option of field 'Status'" in message


async def test_unmapped_column_is_still_an_event_with_no_stage(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    [event] = await parse(adapter, "projects_v2_item", moved(to=PARKED))
    assert isinstance(event, BoardEvent)
    assert (event.kind, event.to_column, event.stage) == ("transition", "Parked", None)


async def test_other_fields_are_ignored_and_cached_fields_cost_nothing(
        adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: {"__typename": "ProjectV2SingleSelectField", "name": "Priority",
                                "options": [{"id": TODO, "name": "P1"}]}, ITEM: item_node(ISSUE)}
    assert await parse(adapter, "projects_v2_item", moved(to=TODO)) == Ignored(
        reason="field 'Priority' changed, not 'Status'")
    assert await parse(adapter, "projects_v2_item", moved(to=TODO)) == Ignored(
        reason="field 'Priority' changed, not 'Status'")
    assert len(github_api.requests) == 1


@pytest.mark.parametrize(("body", "reason"), [
    (moved(to=None), "the Status field was cleared"),
    (moved(field_type="text"), "a 'text' field changed; the Status field is a single select"),
    (moved(field_type="iteration"), "a 'iteration' field changed; the Status field is a single select"),
])
async def test_ignored_without_any_query(adapter: GitHubAdapter, github_api: FakeGitHub, body: bytes,
                                         reason: str) -> None:
    assert await parse(adapter, "projects_v2_item", body) == Ignored(reason=reason)
    assert github_api.requests == []


async def test_other_project_item_actions_are_ignored(adapter: GitHubAdapter) -> None:
    data = fixture_json("github/projects_v2_item.edited.json")
    data["action"] = "reordered"
    assert await parse(adapter, "projects_v2_item", json.dumps(data).encode()) == Ignored(
        reason="projects_v2_item 'reordered': cardloop acts on field edits, archived and deleted items")
    del data["changes"]
    data["action"] = "edited"
    assert await parse(adapter, "projects_v2_item", json.dumps(data).encode()) == Ignored(
        reason="project item edit changed no field value")


async def test_live_value_cleared_is_ignored(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE, status=None)}
    assert await parse(adapter, "projects_v2_item", fixture_bytes("github/projects_v2_item.edited.json")) == Ignored(
        reason="the Status field was cleared")


# -- GraphQL failures: 502, never cached ----------------------------------------------------------

async def test_graphql_errors_are_502(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.nodes = {FIELD: STATUS_FIELD}   # the item is not found
    message = await fails(adapter, "projects_v2_item", moved(), 502)
    assert message == f"GitHub GraphQL errors: Could not resolve to a node with the global id of '{ITEM}'"


@pytest.mark.parametrize(("status", "body", "needle"), [
    (401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/graphql"},
     "GitHub GraphQL answered 401: Bad credentials"),
    (502, b"<html>Bad gateway</html>", "GitHub GraphQL answered 502"),
    (200, b"not json", "something other than a JSON object"),
    (200, {"data": {"field": {"name": 3}, "item": None}}, "unexpected GitHub GraphQL response: field.name"),
    (200, {"data": None}, "unexpected GitHub GraphQL response: missing data"),
])
async def test_bad_graphql_answers_are_502(adapter: GitHubAdapter, github_api: FakeGitHub, status: int,
                                           body: Any, needle: str) -> None:
    github_api.override = (status, body)
    message = await fails(adapter, "projects_v2_item", moved(), 502)
    assert needle in message and TOKEN not in message


async def test_failures_are_not_cached(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    github_api.override = (500, {"message": "Server Error"})
    await fails(adapter, "projects_v2_item", moved(), 502)
    github_api.override = None
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node(ISSUE)}
    [event] = await parse(adapter, "projects_v2_item", moved())
    assert isinstance(event, BoardEvent) and event.stage == "coding"
    assert len(github_api.requests) == 2


async def test_unreachable_github_is_502() -> None:
    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with httpx.AsyncClient() as http:
        adapter = build_adapters(make_config(graphql_url=f"http://127.0.0.1:{port}/graphql"), http)["github"]
        message = await fails(adapter, "projects_v2_item", moved(), 502)
    assert "unreachable" in message


async def test_without_a_token_the_board_is_not_configured(github_api: FakeGitHub) -> None:
    async with httpx.AsyncClient() as http:
        config = make_config(graphql_url=github_api.url, CARDLOOP_GITHUB_TOKEN="")
        adapter = build_adapters(config, http)["github"]
        message = await fails(adapter, "projects_v2_item", moved(), 503)
    assert "CARDLOOP_GITHUB_TOKEN is not set" in message and github_api.requests == []


def test_ttl_cache_is_an_lru() -> None:
    clock = Clock()
    cache: TTLCache[str, int] = TTLCache(maxsize=2, ttl=10, clock=clock)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1      # a is now the most recently used
    cache.put("c", 3)               # evicts b
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    clock.now += 10
    assert cache.get("a") is None and len(cache) == 1


def test_query_declares_only_the_variables_it_uses() -> None:
    both, variables = build_query("F", "I")
    assert variables == {"field": "F", "item": "I"} and "($field: ID!, $item: ID!)" in both
    only_item, variables = build_query(None, "I")
    assert variables == {"item": "I"} and "$field" not in only_item


# -- issue_comment --------------------------------------------------------------------------------

HELLO_WORLD_1 = "MDU6SXNzdWU0NDQ1MDAwNDE="   # the node id of Codertocat/Hello-World#1 in octokit's examples

async def test_issue_comment_created(adapter: GitHubAdapter) -> None:
    result = await parse(adapter, "issue_comment", fixture_bytes("github/issue_comment.created.json"), "d-c")
    assert result == [BoardEvent(
        kind="comment", board="github", tenant="octo", card_id="Codertocat/Hello-World#1", delivery_id="d-c",
        title="Spelling error in the README file", url="https://github.com/Codertocat/Hello-World/issues/1",
        repo="Codertocat/Hello-World", actor="Codertocat",
        comment="You are totally right! I'll get this fixed right away.", board_uid=HELLO_WORLD_1)]


async def test_issue_comment_ignored_cases(adapter: GitHubAdapter) -> None:
    data = fixture_json("github/issue_comment.created.json")
    bot = copy.deepcopy(data)
    bot["comment"]["user"].update(login="cardloop[bot]", type="Bot")
    assert await parse(adapter, "issue_comment", json.dumps(bot).encode()) == Ignored(
        reason="comment by bot 'cardloop[bot]'")
    edited = {**data, "action": "edited"}
    assert await parse(adapter, "issue_comment", json.dumps(edited).encode()) == Ignored(
        reason="issue_comment 'edited': cardloop acts on new comments only")


async def test_issue_comment_without_an_org_uses_the_repo_owner_as_tenant_key(adapter: GitHubAdapter) -> None:
    data = fixture_json("github/issue_comment.created.json")
    del data["organization"]
    [event] = await parse(adapter, "issue_comment", json.dumps(data).encode())
    assert isinstance(event, BoardEvent) and event.tenant is None   # Codertocat is not mapped: no claim


# -- workflow_run / check_suite -------------------------------------------------------------------

def failed(name: str, key: str, **changes: Any) -> bytes:
    data = fixture_json(f"github/{name}")
    data[key].update(conclusion="failure", **changes)
    return json.dumps(data).encode()


async def test_successful_runs_are_ignored(adapter: GitHubAdapter) -> None:
    assert await parse(adapter, "workflow_run", fixture_bytes("github/workflow_run.completed.json")) == Ignored(
        reason="GitHub Actions workflow 'test' run #163 concluded 'success', not a failure")
    assert await parse(adapter, "check_suite", fixture_bytes("github/check_suite.completed.json")) == Ignored(
        reason="check suite of 'octocoders-linter' concluded 'success', not a failure")


async def test_failed_workflow_run_is_build_failed_on_the_linked_pr(adapter: GitHubAdapter) -> None:
    result = await parse(adapter, "workflow_run", failed("workflow_run.completed.json", "workflow_run"), "d-w")
    url = "https://github.com/octo-org/octo-repo/actions/runs/289782451"
    assert result == [BoardEvent(
        # The example's PR lives in Codertocat/Hello-World (its base repo), the run in octo-org/octo-repo.
        kind="build_failed", board="github", tenant=None, card_id="Codertocat/Hello-World#2",
        delivery_id="d-w", stage="error_fixing", url=url, repo="octo-org/octo-repo", branch="master",
        actor="Codertocat",
        comment=f"GitHub Actions workflow 'test' run #163 concluded failure on branch master at 3484a3fb816e: {url}")]


async def test_failed_check_suite_is_build_failed(adapter: GitHubAdapter) -> None:
    result = await parse(adapter, "check_suite", failed("check_suite.completed.json", "check_suite"), "d-s")
    url = "https://github.com/Codertocat/Hello-World/commit/ec26c3e57ca3a959ca5aad62de7213c562f8c821/checks"
    assert result == [BoardEvent(
        kind="build_failed", board="github", tenant="octo", card_id="Codertocat/Hello-World#2", delivery_id="d-s",
        stage="error_fixing", url=url, repo="Codertocat/Hello-World", branch="changes", actor="Codertocat",
        comment=f"check suite of 'octocoders-linter' concluded failure on branch changes at ec26c3e57ca3: {url}")]


async def test_timed_out_counts_cancelled_does_not(adapter: GitHubAdapter) -> None:
    data = json.loads(failed("workflow_run.completed.json", "workflow_run"))
    data["workflow_run"]["conclusion"] = "timed_out"
    assert isinstance(await parse(adapter, "workflow_run", json.dumps(data).encode()), list)
    data["workflow_run"]["conclusion"] = "cancelled"
    assert isinstance(await parse(adapter, "workflow_run", json.dumps(data).encode()), Ignored)


async def test_failure_without_a_linked_pr_is_ignored(adapter: GitHubAdapter) -> None:
    body = failed("workflow_run.completed.json", "workflow_run", pull_requests=[])
    assert await parse(adapter, "workflow_run", body) == Ignored(reason="no pull request is linked to branch 'master'")


async def test_several_prs_get_one_event_each_with_distinct_delivery_ids(adapter: GitHubAdapter) -> None:
    data = json.loads(failed("check_suite.completed.json", "check_suite"))
    second = copy.deepcopy(data["check_suite"]["pull_requests"][0])
    second["number"] = 3
    data["check_suite"]["pull_requests"].append(second)
    events = await parse(adapter, "check_suite", json.dumps(data).encode(), "d-m")
    assert isinstance(events, list)
    assert [(e.card_id, e.delivery_id) for e in events] == [
        ("Codertocat/Hello-World#2", "d-m/Codertocat/Hello-World#2"),
        ("Codertocat/Hello-World#3", "d-m/Codertocat/Hello-World#3")]


async def test_failure_stage_off_ignores_build_failures(github_api: FakeGitHub) -> None:
    config = make_config(graphql_url=github_api.url, CARDLOOP_BOARDS__GITHUB__FAILURE_STAGE='""')
    async with httpx.AsyncClient() as http:
        adapter = build_adapters(config, http)["github"]
        result = await adapter.parse(headers("workflow_run"), failed("workflow_run.completed.json", "workflow_run"))
    assert result == Ignored(reason="boards.github.failure_stage is empty: build failures are not acted on")


# -- ping, other events, malformed deliveries -----------------------------------------------------

async def test_ping_and_unrelated_events_are_ignored(adapter: GitHubAdapter) -> None:
    assert await parse(adapter, "ping", fixture_bytes("github/ping.json")) == Ignored(
        reason="ping: the webhook is set up")
    assert await parse(adapter, "star", fixture_bytes("github/star.created.json")) == Ignored(
        reason="GitHub event 'star' is not one cardloop acts on")


async def test_malformed_deliveries_are_400(adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    comment = fixture_bytes("github/issue_comment.created.json")
    assert "missing X-GitHub-Event" in await fails(adapter, "", comment, 400, httpx.Headers({}))
    no_delivery = httpx.Headers({"X-GitHub-Event": "issue_comment"})
    assert "missing X-GitHub-Delivery" in await fails(adapter, "", comment, 400, no_delivery)
    assert "not valid JSON" in await fails(adapter, "issue_comment", b"{nope", 400)
    assert "must be a JSON object, got an array" in await fails(adapter, "issue_comment", b"[1]", 400)
    data = fixture_json("github/issue_comment.created.json")
    data["issue"]["number"] = "1"
    assert "issue.number must be an integer, got a string" in await fails(
        adapter, "issue_comment", json.dumps(data).encode(), 400)
    del data["repository"]
    assert "missing repository.full_name" in await fails(adapter, "issue_comment", json.dumps(data).encode(), 400)
    item = fixture_json("github/projects_v2_item.edited.json")
    item["projects_v2_item"]["node_id"] = 5
    assert "projects_v2_item.node_id must be a string" in await fails(
        adapter, "projects_v2_item", json.dumps(item).encode(), 400)
    item["projects_v2_item"] = "PVTI"
    assert "projects_v2_item must be an object, got a string" in await fails(
        adapter, "projects_v2_item", json.dumps(item).encode(), 400)
    assert "changes.field_value.to must be an object" in await fails(
        adapter, "projects_v2_item", moved(to=None, frm=None).replace(b'"to": null', b'"to": "47fc9ee4"'), 400)
    assert github_api.requests == []


# -- projects_v2_item archived / deleted ----------------------------------------------------------

ARCHIVED_ITEM = "PVTI_lADOAWcTxs4ACgDdzgBWqxo"    # the real archived example's item and issue
ARCHIVED_ISSUE = "I_kwDOCG5vGM5La0aB"


async def test_an_archived_or_deleted_item_is_an_archive_of_its_issues_card(adapter: GitHubAdapter,
                                                                             github_api: FakeGitHub) -> None:
    github_api.nodes[ARCHIVED_ISSUE] = ISSUE
    body = fixture_bytes("github/projects_v2_item.archived.json")
    assert await parse(adapter, "projects_v2_item", body) == [BoardEvent(
        kind="archive", board="github", tenant="octo", card_id="Octocoders/payments#142", delivery_id="d-1",
        actor="Codertocat", gone="archived", board_uid=ARCHIVED_ISSUE, board_item=ARCHIVED_ITEM)]
    # Looked up by what the item held: a deleted item's own node is gone.
    assert github_api.requests[-1]["variables"] == {"content": ARCHIVED_ISSUE}
    deleted = fixture_json("github/projects_v2_item.archived.json")
    deleted["action"] = "deleted"
    [event] = await parse(adapter, "projects_v2_item", json.dumps(deleted).encode())
    assert (event.kind, event.card_id, event.gone) == ("archive", "Octocoders/payments#142", "deleted")


async def test_an_archived_draft_or_an_issue_github_no_longer_has_is_the_items_card(
        adapter: GitHubAdapter, github_api: FakeGitHub) -> None:
    draft = fixture_json("github/projects_v2_item.archived.json")
    draft["projects_v2_item"]["content_type"] = "DraftIssue"
    [event] = await parse(adapter, "projects_v2_item", json.dumps(draft).encode())
    assert (event.card_id, github_api.requests) == (ARCHIVED_ITEM, [])   # a draft's card is the item
    # The issue itself was deleted: NOT_FOUND is an answer here, not GitHub failing.
    [event] = await parse(adapter, "projects_v2_item", fixture_bytes("github/projects_v2_item.archived.json"))
    assert event.card_id == ARCHIVED_ITEM


# -- stable ids and issues transferred ------------------------------------------------------------

async def test_a_linked_items_move_carries_its_contents_node_id(adapter: GitHubAdapter,
                                                                github_api: FakeGitHub) -> None:
    # GitHub's own answer names the content's node id: that is the card's stable id.
    github_api.nodes = {FIELD: STATUS_FIELD, ITEM: item_node({**ISSUE, "id": "I_kwDOKm4p7M6qMdqX"})}
    [event] = await parse(adapter, "projects_v2_item", moved())
    assert (event.card_id, event.board_uid) == ("Octocoders/payments#142", "I_kwDOKm4p7M6qMdqX")
    assert "... on Issue { id number" in github_api.requests[-1]["query"]
    # Without it in the answer, the payload's content_node_id when the payload says it is an issue.
    adapter.graphql.items = TTLCache(maxsize=8, ttl=60.0)   # forget the item: asked afresh
    github_api.nodes[ITEM] = item_node(ISSUE)
    data = fixture_json("github/projects_v2_item.edited.json")
    data["projects_v2_item"].update(content_type="Issue", content_node_id="I_kwDOCG5vGM5La0aB")
    data["changes"]["field_value"]["to"] = {"id": IN_PROGRESS}
    [event] = await parse(adapter, "projects_v2_item", json.dumps(data).encode())
    assert event.board_uid == "I_kwDOCG5vGM5La0aB"
    # The real example holds a draft: its card is the item, and a draft's node id is no issue's.
    adapter.graphql.items = TTLCache(maxsize=8, ttl=60.0)   # forget the item: asked afresh
    github_api.nodes[ITEM] = item_node(DRAFT)
    [event] = await parse(adapter, "projects_v2_item", moved())
    assert (event.card_id, event.board_uid) == (ITEM, None)


async def test_odd_node_ids_are_left_out_and_the_event_is_answered_as_before(adapter: GitHubAdapter) -> None:
    data = fixture_json("github/issue_comment.created.json")
    for odd in ({"not": "an id"}, "I_kw DO", "", 12, "x" * 301):
        data["issue"]["node_id"] = odd
        [event] = await parse(adapter, "issue_comment", json.dumps(data).encode())
        assert (event.card_id, event.board_uid) == ("Codertocat/Hello-World#1", None), odd
    del data["issue"]["node_id"]
    [event] = await parse(adapter, "issue_comment", json.dumps(data).encode())
    assert event.board_uid is None


MOVED_TO = BoardEvent(
    kind="edit", board="github", tenant=None, card_id="Codertocat/Hello-World#1", delivery_id="d-t",
    title="Spelling error in the README file", body="It looks like you accidently spelled 'commit' with two 't's.",
    url="https://github.com/Codertocat/Hello-World/issues/1", repo="Codertocat/Hello-World", repo_moved=True,
    actor="Codertocat", board_uid=HELLO_WORLD_1, was=("octo-org/octo-repo#1",))


async def test_an_issue_transferred_is_an_edit_naming_the_new_issue_and_the_old_one_as_its_former_id(
        adapter: GitHubAdapter) -> None:
    # octokit's real example: octo-org/octo-repo#1 moved to Codertocat/Hello-World#1.
    assert await parse(adapter, "issues", fixture_bytes("github/issues.transferred.json"), "d-t") == [MOVED_TO]
    # GitHub also tells it from the new repository: `opened` with the old issue in `changes`.
    assert await parse(adapter, "issues", fixture_bytes("github/issues.opened.transferred.json"), "d-t") == [MOVED_TO]


async def test_other_issue_actions_are_ignored_and_a_broken_transfer_is_400(adapter: GitHubAdapter) -> None:
    opened = fixture_json("github/issues.opened.transferred.json")
    del opened["changes"]   # an issue opened by a person: the board's move is what starts a card
    assert await parse(adapter, "issues", json.dumps(opened).encode()) == Ignored(
        reason="issues 'opened': cardloop acts on issues transferred to another repository (moves arrive as "
               "projects_v2_item)")
    closed = {**fixture_json("github/issues.transferred.json"), "action": "closed"}
    assert isinstance(await parse(adapter, "issues", json.dumps(closed).encode()), Ignored)
    transferred = fixture_json("github/issues.transferred.json")
    del transferred["changes"]["new_repository"]
    assert "missing changes.new_repository.full_name" in await fails(
        adapter, "issues", json.dumps(transferred).encode(), 400)
    transferred = fixture_json("github/issues.transferred.json")
    transferred["changes"]["new_issue"]["number"] = "1"
    assert "changes.new_issue.number must be an integer" in await fails(
        adapter, "issues", json.dumps(transferred).encode(), 400)
    # The new issue's node id is optional: without one the move is still told by the names.
    transferred = fixture_json("github/issues.transferred.json")
    transferred["changes"]["new_issue"]["node_id"] = None
    [event] = await parse(adapter, "issues", json.dumps(transferred).encode())
    assert (event.card_id, event.board_uid, event.was) == ("Codertocat/Hello-World#1", None, ("octo-org/octo-repo#1",))


def test_the_transfer_is_timed_by_its_issues_updated_at(adapter: GitHubAdapter) -> None:
    body = fixture_bytes("github/issues.transferred.json")
    assert adapter.event_time(headers("issues"), body) == 1572043590.0   # 2019-10-25T22:46:30Z
