"""Whatever a sender posts, an adapter answers with events, Ignored or WebhookError(400) -- never
another exception -- and a signature check with WebhookError(401)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardloop.app.boards.adapters import build_adapters
from cardloop.app.boards.events import BoardEvent, Ignored, WebhookError

from .conftest import FakeGitHub, fixture_json, make_config
from .github_payloads import repository_event

SAMPLES: dict[str, list[tuple[str, str]]] = {   # board -> (GitHub event header, fixture)
    "github": [("projects_v2_item", "github/projects_v2_item.edited.json"),
               ("issue_comment", "github/issue_comment.created.json"),
               ("workflow_run", "github/workflow_run.completed.json"),
               ("check_suite", "github/check_suite.completed.json"),
               ("issues", "github/issues.transferred.json"), ("issues", "github/issues.opened.transferred.json"),
               ("ping", "github/ping.json"), ("star", "github/star.created.json"),
               ("repository", "renamed"), ("repository", "transferred")],   # built by repository_event
    "linear": [("", "linear/issue_update_state.json"), ("", "linear/comment_create.json")],
    "jira": [("", "jira/issue_updated_status.json"), ("", "jira/comment_created.json")],
    "trello": [("", "trello/update_card_move.json"), ("", "trello/comment_card.json")],
    "generic": [],
}
GENERIC = {"card_id": "OPS-7", "tenant": "ops", "to_column": "coding", "stage": "review", "comment": "hi",
           "delivery_id": "g-1", "title": "t", "body": "b", "url": "u", "repo": "a/b", "branch": "x", "actor": "me"}
INTERESTING = ["edited", "created", "completed", "failure", "update", "create", "Issue", "Comment", "status",
               "updateCard", "commentCard", "jira:issue_updated", "comment_created", "single_select", "Status",
               "Bot", "to", "from", "id", "name", "done", "coding", "transferred", "opened", "node_id"]

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=30) | st.sampled_from(INTERESTING) | st.text(min_size=190, max_size=400))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12) | st.sampled_from(INTERESTING), inner, max_size=4),
                           max_leaves=12)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += paths(child, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, board: str) -> tuple[dict[str, str], bytes]:
    """A real payload with a few values replaced, removed or retyped, and plausible headers."""
    if board == "generic":
        event, data = "", {k: v for k, v in GENERIC.items() if draw(st.booleans())}
    else:
        event, name = draw(st.sampled_from(SAMPLES[board]))
        data = repository_event(name, "acme/old", "acme/new") if event == "repository" else fixture_json(name)
        if event in ("workflow_run", "check_suite") and draw(st.booleans()):
            data[event]["conclusion"] = "failure"
        if event == "projects_v2_item" and draw(st.booleans()):
            data["changes"]["field_value"]["to"] = {"id": draw(st.sampled_from(["opt-1", "opt-2", "zz"])),
                                                    "name": "In Progress"}
    for _ in range(draw(st.integers(0, 4))):
        where = paths(data)
        if not where:
            break
        path = draw(st.sampled_from(where))
        parent: Any = data
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    headers = {"x-github-event": draw(st.sampled_from([event, event, "issue_comment", "projects_v2_item"])) or "star",
               "x-delivery-id": "hdr-1"}
    if draw(st.integers(0, 9)):
        headers.update({"x-github-delivery": "d-1", "linear-delivery": "l-1", "x-atlassian-webhook-identifier": "j-1"})
    return headers, json.dumps(data).encode()


def raw_bodies() -> st.SearchStrategy[bytes]:
    return st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode())


def fuzz_graphql(server: FakeGitHub) -> None:
    """Any field id is the Status field, any item an issue: the fuzz exercises the payload side."""
    def answer(alias: str, node_id: str) -> dict[str, Any]:
        if alias == "field":
            return {"__typename": "ProjectV2SingleSelectField", "name": "Status",
                    "options": [{"id": "opt-1", "name": "In Progress"}, {"id": "opt-2", "name": "Elsewhere"}]}
        return {"__typename": "ProjectV2Item", "fieldValues": {"nodes": []},
                "content": {"__typename": "Issue", "id": "I_kwDOfuzz", "number": 1, "title": "t", "body": None,
                            "url": "https://x/1",
                            "repository": {"nameWithOwner": "o/r"}}}
    server.default = answer


def check(result: Any) -> None:
    assert isinstance(result, Ignored) or (isinstance(result, list) and all(isinstance(e, BoardEvent)
                                                                            for e in result)), result


@pytest.mark.parametrize("board", list(SAMPLES))
def test_parse_only_ever_answers_events_ignored_or_400(board: str, github_api: FakeGitHub) -> None:
    fuzz_graphql(github_api)
    loop = asyncio.new_event_loop()
    http = httpx.AsyncClient()
    adapter = build_adapters(make_config(graphql_url=github_api.url), http)[board]

    def run(headers: dict[str, str], body: bytes) -> None:
        try:
            check(loop.run_until_complete(adapter.parse(headers, body)))
        except WebhookError as exc:
            assert exc.status == 400, exc.message

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=mutated(board))
    def fuzz_mutated(case: tuple[dict[str, str], bytes]) -> None:
        run(*case)

    @settings(max_examples=100, deadline=None)
    @given(body=raw_bodies(), event=st.sampled_from([h for h, _ in SAMPLES["github"]] or [""]))
    def fuzz_raw(body: bytes, event: str) -> None:
        run({"x-github-event": event, "x-github-delivery": "d", "x-delivery-id": "d"}, body)

    try:
        fuzz_mutated()
        fuzz_raw()
    finally:
        loop.run_until_complete(http.aclose())
        loop.close()


@pytest.mark.parametrize("board", list(SAMPLES))
async def test_verify_only_ever_refuses_with_401(board: str) -> None:
    async with httpx.AsyncClient() as http:
        adapter = build_adapters(make_config(), http)[board]

    @settings(max_examples=150, deadline=None)
    @given(body=raw_bodies(), value=st.text(max_size=80), now=st.floats(allow_nan=True, allow_infinity=True))
    def fuzz(body: bytes, value: str, now: float) -> None:
        headers = {name: value for name in ("x-hub-signature-256", "x-hub-signature", "linear-signature",
                                            "x-trello-webhook")}
        with pytest.raises(WebhookError) as info:
            adapter.verify(headers, body, "secret", now)
        assert info.value.status == 401

    fuzz()


# Where each board's signed body carries its send time (event_time reads it before parse runs).
TIME_PATHS = {"generic": "timestamp", "jira": "timestamp", "github": "workflow_run.updated_at",
              "trello": "action.date", "linear": "webhookTimestamp"}


@pytest.mark.parametrize("board", list(SAMPLES))
@pytest.mark.parametrize("stamp", [10 ** 400, -(10 ** 400), float("nan"), float("inf"), 1e308 * 10, 2 ** 1024])
async def test_event_time_of_an_out_of_range_number_is_none_or_a_400(board: str, stamp: object) -> None:
    # A JSON integer may be larger than any float, and Python's json reads NaN and Infinity:
    # `math.isfinite` raises OverflowError on the first, which had been a 500.
    async with httpx.AsyncClient() as http:
        adapter = build_adapters(make_config(), http)[board]
    data: dict[str, Any] = {}
    parent = data
    *steps, last = TIME_PATHS[board].split(".")
    for step in steps:
        parent = parent.setdefault(step, {})
    parent[last] = stamp
    body = json.dumps(data).encode()
    try:
        assert adapter.event_time({"x-github-event": "workflow_run"}, body) is None
    except WebhookError as exc:
        assert exc.status == 400, exc.message
        assert "finite number" in exc.message or "ISO 8601" in exc.message, exc.message

