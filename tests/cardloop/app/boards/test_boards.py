"""Linear, Jira, Trello and the generic board on realistic payloads: the canonical event in full,
unmapped columns, ignored deliveries with their reasons, and 400s for bad shapes."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cardloop.app.boards.adapters import BoardAdapter, build_adapters
from cardloop.app.boards.events import BoardEvent, Ignored, WebhookError
from cardloop.app.boards.generic import GenericEvent, generic_event_schema
from cardloop.app.boards.jira import adf_text, browse_url

from .conftest import fixture_bytes, fixture_json, make_config

ISSUE_TITLE = "Retry failed payouts with exponential backoff"
DESCRIPTION = ("Payouts that fail with a 5xx from the bank API are dropped.\n\n"
               "Retry them with exponential backoff (max 5 attempts) and alert after the last one.")
COMMENT = "Cap the delay at 30s, the bank's idempotency window is 60s."
# The stable ids the sample payloads carry beside the human ones (a move keeps them).
ISSUE_UUID = "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"       # Linear's data.id / a comment's data.issue.id
TRELLO_CARD_ID = "67c0a1b2c3d4e5f6a7b8c9d0"               # Trello's action.data.card.id


@pytest.fixture
async def adapters() -> AsyncIterator[dict[str, BoardAdapter]]:
    async with httpx.AsyncClient() as http:
        yield build_adapters(make_config(), http)


async def parse(adapter: BoardAdapter, data: dict[str, Any] | bytes, **hdrs: str) -> list[BoardEvent] | Ignored:
    body = data if isinstance(data, bytes) else json.dumps(data).encode()
    return await adapter.parse(httpx.Headers({k.replace("_", "-"): v for k, v in hdrs.items()}), body)


async def bad(adapter: BoardAdapter, data: dict[str, Any] | bytes, **hdrs: str) -> str:
    with pytest.raises(WebhookError) as info:
        await parse(adapter, data, **hdrs)
    assert info.value.status == 400
    return info.value.message


# -- Linear ---------------------------------------------------------------------------------------

async def test_linear_state_change(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["linear"], fixture_bytes("linear/issue_update_state.json"),
                         Linear_Delivery="5b0a3c1e-0f4d-4a7e-9c2b-8d6e1f3a5c70", Linear_Event="Issue")
    assert result == [BoardEvent(
        kind="transition", board="linear", tenant="acme", card_id="ENG-123",
        delivery_id="5b0a3c1e-0f4d-4a7e-9c2b-8d6e1f3a5c70", from_column=None, to_column="In Progress",
        stage="coding", title=ISSUE_TITLE, body=DESCRIPTION,
        url="https://linear.app/acme/issue/ENG-123/retry-failed-payouts-with-exponential-backoff",
        repo=None, branch="priya/eng-123-retry-failed-payouts-with-exponential-backoff", actor="Priya Raman",
        at=1741083330.123, board_uid=ISSUE_UUID)]   # data.updatedAt: when the state changed (orders late moves)


async def test_linear_delivery_id_without_the_header(adapters: dict[str, BoardAdapter]) -> None:
    [event] = await parse(adapters["linear"], fixture_bytes("linear/issue_update_state.json"))
    assert event.delivery_id == "0b3f4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d:2025-03-04T10:15:30.123Z"


async def test_linear_comment(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["linear"], fixture_bytes("linear/comment_create.json"), Linear_Delivery="ld-2")
    assert result == [BoardEvent(
        kind="comment", board="linear", tenant="acme", card_id="ENG-123", delivery_id="ld-2",
        title=ISSUE_TITLE, url="https://linear.app/acme/issue/ENG-123/retry-failed-payouts-with-exponential-backoff",
        actor="Marco Bianchi", comment=COMMENT, board_uid=ISSUE_UUID)]


async def test_linear_unmapped_state_and_unknown_org(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("linear/issue_update_state.json")
    data["data"]["state"]["name"] = "Backlog"
    data["organizationId"] = "another-org"
    [event] = await parse(adapters["linear"], data)
    # an org no tenant map names claims no tenant: the verified secret's tenant is used
    assert (event.kind, event.to_column, event.stage, event.tenant) == ("transition", "Backlog", None, None)


IGNORED_LINEAR_UPDATE = "Linear issue update did not change its state, title, description or team"


@pytest.mark.parametrize(("change", "reason"), [
    (lambda d: d["updatedFrom"].pop("stateId"), IGNORED_LINEAR_UPDATE),
    (lambda d: d.pop("updatedFrom"), IGNORED_LINEAR_UPDATE),
    (lambda d: d.update(action="create"), "Linear 'Issue' 'create': cardloop acts on issue state changes, "
                                          "archived and deleted issues, and new comments"),
    (lambda d: d.update(type="Project"), "Linear 'Project' 'update': cardloop acts on issue state changes, "
                                         "archived and deleted issues, and new comments"),
])
async def test_linear_ignored(adapters: dict[str, BoardAdapter], change: Any, reason: str) -> None:
    data = fixture_json("linear/issue_update_state.json")
    change(data)
    assert await parse(adapters["linear"], data) == Ignored(reason=reason)


async def test_linear_bad_shapes(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("linear/issue_update_state.json")
    broken = copy.deepcopy(data)
    # Nothing names the issue: no identifier, no team key and number, no issue URL.
    for gone in ("identifier", "number", "url"):
        del broken["data"][gone]
    broken["url"] = "https://linear.app/acme/view/all-issues"
    assert await bad(adapters["linear"], broken, Linear_Delivery="x") == "missing data.identifier"
    broken = copy.deepcopy(data)
    broken["data"]["state"] = "In Progress"
    assert await bad(adapters["linear"], broken) == "data.state must be an object, got a string"
    broken = copy.deepcopy(data)
    del broken["webhookId"], broken["data"]["id"]
    assert await bad(adapters["linear"], broken) == "missing webhookId"   # no Linear-Delivery header either
    comment = fixture_json("linear/comment_create.json")
    comment["data"]["issue"] = {"id": comment["data"]["issueId"], "title": "no identifier, no url"}
    comment["url"] = "https://linear.app/acme/comment/a1b2c3d4"
    assert await bad(adapters["linear"], comment, Linear_Delivery="x") == "missing data.issue.identifier"


async def test_linear_identifier_from_what_the_payload_has(adapters: dict[str, BoardAdapter]) -> None:
    # Linear's current schema names the issue; payloads from before it did still name it through the
    # team key and number, or the URL (tests/fixtures/linear/recorded holds such payloads).
    data = fixture_json("linear/issue_update_state.json")
    del data["data"]["identifier"]
    [event] = await parse(adapters["linear"], data, Linear_Delivery="x")
    assert event.card_id == "ENG-123"
    del data["data"]["number"]
    [event] = await parse(adapters["linear"], data, Linear_Delivery="x")
    assert event.card_id == "ENG-123"   # data.url: .../issue/ENG-123/retry-failed-payouts-...
    comment = fixture_json("linear/comment_create.json")
    del comment["data"]["issue"]   # the url still says: .../issue/ENG-123/...#comment-a1b2c3d4
    [event] = await parse(adapters["linear"], comment, Linear_Delivery="x")
    assert (event.card_id, event.comment) == ("ENG-123", COMMENT)
    data = fixture_json("linear/issue_update_state.json")
    del data["webhookId"]   # no Linear-Delivery header: the issue's id and the event's time label it
    [event] = await parse(adapters["linear"], data)
    assert event.delivery_id == "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9:2025-03-04T10:15:30.123Z"


# -- Jira -----------------------------------------------------------------------------------------

async def test_jira_status_change(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["jira"], fixture_bytes("jira/issue_updated_status.json"),
                         X_Atlassian_Webhook_Identifier="34c8a3f1-9d7e-4b52-a1c6-0e2f4d8b7a91")
    assert result == [BoardEvent(
        kind="transition", board="jira", tenant="payments", card_id="PAY-142",
        delivery_id="34c8a3f1-9d7e-4b52-a1c6-0e2f4d8b7a91", from_column="To Do", to_column="In Progress",
        stage="coding", title=ISSUE_TITLE, body=DESCRIPTION.replace("\n", "\r\n"),
        url="https://acme.atlassian.net/browse/PAY-142", actor="Priya Raman", board_uid="acme.atlassian.net:10142")]


async def test_jira_delivery_id_without_the_header(adapters: dict[str, BoardAdapter]) -> None:
    [event] = await parse(adapters["jira"], fixture_bytes("jira/issue_updated_status.json"))
    assert event.delivery_id == "jira:issue_updated:1741083330456:PAY-142"


async def test_jira_comment(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["jira"], fixture_bytes("jira/comment_created.json"))
    assert result == [BoardEvent(
        kind="comment", board="jira", tenant="payments", card_id="PAY-142",
        delivery_id="comment_created:1741086130400:PAY-142", title=ISSUE_TITLE,
        url="https://acme.atlassian.net/browse/PAY-142", actor="Marco Bianchi", comment=COMMENT,
        board_uid="acme.atlassian.net:10142")]


async def test_jira_unmapped_status_and_adf_description(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("jira/issue_updated_status.json")
    data["changelog"]["items"][0]["toString"] = "Blocked"
    data["issue"]["fields"]["description"] = {"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": "First "}, {"type": "text", "text": "line."}]},
        {"type": "paragraph", "content": [{"type": "text", "text": "Second."}]}]}
    [event] = await parse(adapters["jira"], data)
    assert (event.to_column, event.stage, event.body) == ("Blocked", None, "First line.\nSecond.")


async def test_jira_ignored(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("jira/issue_updated_status.json")
    data["changelog"]["items"] = [{"field": "assignee", "fieldtype": "jira", "fieldId": "assignee",
                                   "from": None, "fromString": "Old", "to": None, "toString": "New"}]
    assert await parse(adapters["jira"], data) == Ignored(
        reason="Jira issue update did not change its status, summary, description or project")
    data["changelog"]["items"][0].update(field="summary", fieldId="summary")
    [edit] = await parse(adapters["jira"], data)   # a rename: the card's title follows it
    assert (edit.kind, edit.card_id, edit.title) == ("edit", "PAY-142", data["issue"]["fields"]["summary"])
    data["webhookEvent"] = "jira:issue_created"
    assert await parse(adapters["jira"], data) == Ignored(
        reason="Jira event 'jira:issue_created': cardloop acts on status changes, deleted issues and new comments")


async def test_jira_bad_shapes(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("jira/issue_updated_status.json")
    broken = copy.deepcopy(data)
    del broken["changelog"]["items"][0]["toString"]
    assert await bad(adapters["jira"], broken) == "missing changelog.items.0.toString"
    broken = copy.deepcopy(data)
    broken["changelog"]["items"] = {"field": "status"}
    assert await bad(adapters["jira"], broken) == "changelog.items must be an array, got an object"
    broken = copy.deepcopy(data)
    broken["issue"]["key"] = 142
    assert await bad(adapters["jira"], broken) == "issue.key must be a string, got a number"
    broken = copy.deepcopy(data)
    broken["issue"]["fields"]["description"] = 5
    assert await bad(adapters["jira"], broken) == \
        "issue.fields.description must be a string or a document, got a number"


def test_jira_helpers() -> None:
    assert browse_url("https://acme.atlassian.net/rest/api/2/issue/10142", "PAY-142") == \
        "https://acme.atlassian.net/browse/PAY-142"
    assert browse_url(None, "PAY-1") is None and browse_url("https://x/other", "PAY-1") is None
    assert adf_text({"type": "doc", "content": [{"type": "paragraph", "content": [
        {"type": "text", "text": "a"}, {"type": "hardBreak"}, {"type": "text", "text": "b"}]}]}) == "a\nb"


# -- Trello ---------------------------------------------------------------------------------------

async def test_trello_list_move(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["trello"], fixture_bytes("trello/update_card_move.json"))
    assert result == [BoardEvent(
        kind="transition", board="trello", tenant="acme", card_id="aB3dE5fG", delivery_id="67c6d5e2f1a2b3c4d5e6f708",
        from_column="To Do", to_column="Doing", stage="coding", title=ISSUE_TITLE,
        url="https://trello.com/c/aB3dE5fG", actor="Priya Raman", board_uid=TRELLO_CARD_ID)]


async def test_trello_comment(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["trello"], fixture_bytes("trello/comment_card.json"))
    assert result == [BoardEvent(
        kind="comment", board="trello", tenant="acme", card_id="aB3dE5fG", delivery_id="67c6e3a4b5c6d7e8f9a0b1c2",
        title=ISSUE_TITLE, url="https://trello.com/c/aB3dE5fG", actor="Marco Bianchi",
        comment="Cap the delay at 30s – the bank's idempotency window is 60s.", board_uid=TRELLO_CARD_ID)]


async def test_trello_card_without_short_link_and_unmapped_list(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("trello/update_card_move.json")
    del data["action"]["data"]["card"]["shortLink"]
    del data["action"]["data"]["board"]
    data["action"]["data"]["listAfter"]["name"] = "Icebox"
    [event] = await parse(adapters["trello"], data)
    assert (event.card_id, event.url, event.to_column, event.stage, event.tenant) == (
        "67c0a1b2c3d4e5f6a7b8c9d0", None, "Icebox", None, "acme")   # tenant key from model.id


async def test_trello_ignored(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("trello/update_card_move.json")
    rename = copy.deepcopy(data)
    for key in ("listBefore", "listAfter"):
        del rename["action"]["data"][key]
    rename["action"]["data"]["old"] = {"name": "Retry payouts"}
    [edit] = await parse(adapters["trello"], rename)   # a rename: the card's title follows it
    assert (edit.kind, edit.card_id) == ("edit", "aB3dE5fG")
    assert edit.title == "Retry failed payouts with exponential backoff"
    rename["action"]["data"]["old"] = {"pos": 16384}
    assert await parse(adapters["trello"], rename) == Ignored(
        reason="Trello card update was not a move between lists, an archive, a rename or a description edit")
    data["action"]["type"] = "addMemberToCard"
    assert await parse(adapters["trello"], data) == Ignored(
        reason="Trello action 'addMemberToCard': cardloop acts on list moves, comments, archived and deleted cards")


async def test_trello_bad_shapes(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("trello/update_card_move.json")
    broken = copy.deepcopy(data)
    del broken["action"]["id"]
    assert await bad(adapters["trello"], broken) == "missing action.id"
    broken = copy.deepcopy(data)
    del broken["action"]["data"]["card"]
    assert await bad(adapters["trello"], broken) == "missing action.data.card"
    broken = copy.deepcopy(data)
    broken["action"]["data"]["listAfter"] = {"id": "x"}
    assert await bad(adapters["trello"], broken) == "missing action.data.listAfter.name"


# -- generic --------------------------------------------------------------------------------------

async def test_generic_move_by_column(adapters: dict[str, BoardAdapter]) -> None:
    posted = {"card_id": "OPS-7", "tenant": "ops", "to_column": "Coding", "from_column": "planning",
              "title": "Rotate the TLS certificates", "body": "Before Friday.", "url": "https://ops.example/7",
              "repo": "acme/infra", "branch": "ops-7-rotate-certs", "actor": "sam", "delivery_id": "g-1"}
    assert await parse(adapters["generic"], posted) == [BoardEvent(
        kind="transition", board="generic", tenant="ops-team", card_id="OPS-7", delivery_id="g-1",
        from_column="planning", to_column="Coding", stage="coding", title="Rotate the TLS certificates",
        body="Before Friday.", url="https://ops.example/7", repo="acme/infra", branch="ops-7-rotate-certs",
        actor="sam")]


async def test_generic_explicit_stage_and_header_delivery(adapters: dict[str, BoardAdapter]) -> None:
    result = await parse(adapters["generic"], {"card_id": "OPS-7", "stage": "done"}, X_Delivery_Id="hdr-1")
    assert result == [BoardEvent(kind="transition", board="generic", tenant=None, card_id="OPS-7",
                                 delivery_id="hdr-1", to_column="done", stage="done")]


async def test_generic_comment_alone_and_with_a_move(adapters: dict[str, BoardAdapter]) -> None:
    alone = await parse(adapters["generic"], {"card_id": "OPS-7", "comment": "Use the new CA.", "delivery_id": "c"})
    assert alone == [BoardEvent(kind="comment", board="generic", tenant=None, card_id="OPS-7",
                                delivery_id="c", comment="Use the new CA.")]
    both = await parse(adapters["generic"], {"card_id": "OPS-7", "comment": "Go.", "stage": "testing",
                                             "delivery_id": "m"})
    assert isinstance(both, list)
    assert [(e.kind, e.delivery_id, e.stage) for e in both] == [("comment", "m:comment", None),
                                                                ("transition", "m", "testing")]


async def test_generic_unmapped_column(adapters: dict[str, BoardAdapter]) -> None:
    [event] = await parse(adapters["generic"], {"card_id": "OPS-7", "to_column": "someday",
                                                "delivery_id": "u"})
    assert (event.to_column, event.stage) == ("someday", None)


@pytest.mark.parametrize(("posted", "needle"), [
    ({"card_id": "OPS-7", "stage": "deploying", "delivery_id": "x"}, "stage: Input should be"),
    ({"card_id": "OPS-7", "delivery_id": "x"}, "give to_column, stage or comment"),
    ({"card_id": "OPS-7", "to_column": "coding"}, "missing delivery_id"),
    ({"card_id": "", "to_column": "coding", "delivery_id": "x"}, "card_id: String should have at least 1"),
    ({"card_id": 7, "to_column": "coding", "delivery_id": "x"}, "card_id: Input should be a valid string"),
    ({"card_id": "OPS-7", "stgae": "coding", "delivery_id": "x"}, "stgae: Extra inputs are not permitted"),
    ({"card_id": "OPS-7", "to_column": "coding", "delivery_id": "x" * 281}, "delivery_id: String should have at most"),
])
async def test_generic_bad_posts(adapters: dict[str, BoardAdapter], posted: dict[str, Any], needle: str) -> None:
    assert needle in await bad(adapters["generic"], posted)


async def test_generic_overlong_header_delivery_id(adapters: dict[str, BoardAdapter]) -> None:
    message = await bad(adapters["generic"], {"card_id": "OPS-7", "stage": "coding"}, X_Delivery_Id="d" * 400)
    assert "longer than 280" in message


def test_generic_schema_is_exported() -> None:
    schema = generic_event_schema()
    assert schema["title"] == "GenericEvent" and schema["required"] == ["card_id"]
    assert schema["additionalProperties"] is False
    stage = schema["properties"]["stage"]["anyOf"][0]
    assert stage["enum"] == ["planning", "coding", "review", "testing", "error_fixing", "done"]
    assert GenericEvent.__doc__ and "X-Hub-Signature-256" in GenericEvent.__doc__


# -- shared rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["linear", "jira", "trello", "generic"])
@pytest.mark.parametrize(("body", "needle"), [
    (b"", "not valid JSON"), (b"\xff\xfe\x00", "not valid JSON"), (b'"text"', "got a string"),
    (b"null", "got null"), (b"[" * 100_000, "not valid JSON"),
])
async def test_malformed_bodies_are_400(adapters: dict[str, BoardAdapter], name: str, body: bytes,
                                        needle: str) -> None:
    assert needle in await bad(adapters[name], body)


async def test_an_overlong_card_id_is_400_not_500(adapters: dict[str, BoardAdapter]) -> None:
    data = fixture_json("jira/issue_updated_status.json")
    data["issue"]["key"] = "PAY-" + "9" * 300
    assert "card_id: String should have at most 200 characters" in await bad(adapters["jira"], data)


# -- archived and deleted cards -------------------------------------------------------------------

async def test_an_archived_or_deleted_card_is_an_archive_event(adapters: dict[str, BoardAdapter]) -> None:
    trello = await parse(adapters["trello"], fixture_bytes("trello/update_card_archive.json"))
    assert trello == [BoardEvent(
        kind="archive", board="trello", tenant="acme", card_id="aB3dE5fG", delivery_id="67c6d9a4f1a2b3c4d5e6f8a1",
        title=ISSUE_TITLE, url="https://trello.com/c/aB3dE5fG", actor="Priya Raman", gone="archived",
        board_uid=TRELLO_CARD_ID)]
    [deleted] = await parse(adapters["trello"], fixture_bytes("trello/delete_card.json"))
    assert (deleted.kind, deleted.card_id, deleted.gone, deleted.actor) == ("archive", "aB3dE5fG", "deleted",
                                                                            "Priya Raman")
    [removed] = await parse(adapters["linear"], fixture_bytes("linear/issue_remove.json"), Linear_Delivery="ld-9")
    assert removed == BoardEvent(
        kind="archive", board="linear", tenant="acme", card_id="ENG-123", delivery_id="ld-9",
        url="https://linear.app/acme/issue/ENG-123/retry-failed-payouts-with-exponential-backoff",
        actor="Priya Raman", gone="deleted", board_uid=ISSUE_UUID)
    # Linear archives with an update setting archivedAt (updatedFrom names it, null before).
    update = fixture_json("linear/issue_update_state.json")
    update["updatedFrom"] = {"updatedAt": "2025-03-04T10:15:30.123Z", "archivedAt": None}
    update["data"]["archivedAt"] = "2025-03-04T10:31:02.118Z"
    [archived] = await parse(adapters["linear"], update)
    assert (archived.kind, archived.card_id, archived.gone) == ("archive", "ENG-123", "archived")
    [jira] = await parse(adapters["jira"], fixture_bytes("jira/issue_deleted.json"))
    assert (jira.kind, jira.card_id, jira.tenant, jira.gone, jira.actor) == (
        "archive", "PAY-142", "payments", "deleted", "Priya Raman")


async def test_an_unarchived_card_asks_nothing(adapters: dict[str, BoardAdapter]) -> None:
    trello = fixture_json("trello/update_card_archive.json")
    trello["action"]["data"]["old"] = {"closed": True}
    trello["action"]["data"]["card"]["closed"] = False
    assert isinstance(await parse(adapters["trello"], trello), Ignored)
    linear = fixture_json("linear/issue_update_state.json")
    linear["updatedFrom"] = {"updatedAt": "2025-03-04T10:15:30.123Z", "archivedAt": "2025-03-04T10:31:02.118Z"}
    assert isinstance(await parse(adapters["linear"], linear), Ignored)


async def test_a_generic_card_gone_is_an_archive_event_and_stands_alone(adapters: dict[str, BoardAdapter]) -> None:
    [archived] = await parse(adapters["generic"], {"card_id": "OPS-9", "gone": "deleted", "actor": "sam",
                                                   "delivery_id": "g-9"})
    assert (archived.kind, archived.card_id, archived.gone, archived.actor) == ("archive", "OPS-9", "deleted", "sam")
    assert "gone stands alone" in await bad(adapters["generic"], {"card_id": "OPS-9", "gone": "archived",
                                                                  "stage": "coding", "delivery_id": "g-10"})
    assert "gone: Input should be 'archived' or 'deleted'" in await bad(
        adapters["generic"], {"card_id": "OPS-9", "gone": "closed", "delivery_id": "g-11"})


def test_the_readme_lists_every_field_a_generic_delivery_may_carry() -> None:
    # "unknown fields are refused": a field the README leaves out (from_column, gone) is one a
    # script's author would not dare send.
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = readme.split("- **Generic JSON**", 1)[1].split("unknown fields are refused", 1)[0]
    missing = [f for f in generic_event_schema()["properties"] if f'"{f}"' not in listed]
    assert missing == [], missing


async def test_generic_stage_wins_over_to_column_which_is_recorded(adapters: dict[str, BoardAdapter]) -> None:
    [event] = await parse(adapters["generic"], {"card_id": "OPS-7", "to_column": "Planning", "stage": "coding",
                                                "delivery_id": "both"})
    assert event.stage == "coding" and event.to_column == "Planning"
