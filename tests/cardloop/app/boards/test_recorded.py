"""Payloads Linear, Jira and Trello really sent (tests/fixtures/*/recorded, sources in each README),
through the path the API takes: the signature computed as the board computes it over the raw
bytes, the replay window at the time the board sent it, then parse. Every one is understood: a
move, edit, comment or archive of the right card, or a 2xx "ignored" with its reason; none is
refused, since the board would not send it differently."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
import pytest

from cardloop.app.boards.adapters import BoardAdapter, build_adapters
from cardloop.app.boards.events import BoardEvent, Ignored, SignatureMismatch
from cardloop.app.boards.replay import check_window
from cardloop.contracts.config import Config

from .conftest import fixture_bytes, make_config

SECRET = "recorded-payload-secret"
CALLBACK = "https://cardloop.acme.dev/webhooks/trello"   # make_config's boards.trello.callback_url


@pytest.fixture
def config() -> Config:
    return make_config()


@pytest.fixture
async def adapters(config: Config) -> AsyncIterator[dict[str, BoardAdapter]]:
    async with httpx.AsyncClient() as http:
        yield build_adapters(config, http)


def signed(board: str, body: bytes, secret: str = SECRET) -> dict[str, str]:
    """The signature header as the board computes it."""
    if board == "linear":   # hex HMAC-SHA256 of the body (@linear/sdk 98.0.0 LinearWebhookClient.verify)
        return {"linear-signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}
    if board == "jira":     # WebSub method=signature
        return {"x-hub-signature": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}
    digest = hmac.new(secret.encode(), body + CALLBACK.encode(), hashlib.sha1).digest()   # Trello
    return {"x-trello-webhook": base64.b64encode(digest).decode()}


def sent_at(board: str, body: bytes) -> float:
    """When the board sent it: the clock the replay checks run against."""
    data = json.loads(body)
    if board == "linear":
        return float(data["webhookTimestamp"]) / 1000
    if board == "jira":
        return float(data["timestamp"]) / 1000
    return datetime.fromisoformat(data["action"]["date"]).timestamp()


async def deliver(adapters: dict[str, BoardAdapter], config: Config, path: str,
                  **extra: str) -> list[BoardEvent] | Ignored:
    """verify, the replay window, parse: what routes.webhook does before applying."""
    board = path.split("/", 1)[0]
    body = fixture_bytes(path)
    adapter, now = adapters[board], sent_at(board, body)
    headers = httpx.Headers({**signed(board, body), **extra})
    adapter.verify(headers, body, SECRET, now)
    check_window(adapter.event_time(headers, body), now, config.board(board).replay_window_seconds, board)
    return await adapter.parse(headers, body)


def summary(result: list[BoardEvent] | Ignored) -> object:
    if isinstance(result, Ignored):
        return result.reason
    return [(e.kind, e.card_id, e.from_column, e.to_column, e.stage, e.gone, e.actor) for e in result]


IGNORED_LINEAR_EDIT = "Linear issue update did not change its state, title, description or team"
IGNORED_JIRA_EDIT = "Jira issue update did not change its status, summary, description or project"
IGNORED_TRELLO_EDIT = ("Trello card update was not a move between lists, an archive, a rename or a "
                       "description edit")

EXPECTED: dict[str, object] = {
    # Linear, 2023: no data.identifier, no actor, no webhookId (the team key and number, or the URL, name the issue)
    "linear/recorded/issue_update_state.json": [("transition", "WEB-44", None, "In Progress", "coding", None, None)],
    "linear/recorded/issue_update_title.json": [("edit", "WEB-44", None, None, None, None, None)],
    "linear/recorded/issue_update_labels.json": IGNORED_LINEAR_EDIT,
    # WEB-44 moved to team OPS: named by its new identifier (its UUID and former one lead to the card)
    "linear/recorded/issue_update_team.json": [("transition", "OPS-7", None, "In Progress", "coding", None, None)],
    "linear/recorded/issue_remove.json": [("archive", "WEB-44", None, None, None, "deleted", None)],
    "linear/recorded/comment_create.json": [("comment", "WEB-46", None, None, None, None, "Satyam Bansal")],
    "linear/recorded/comment_on_document.json": ("Linear comment on something other than an issue (a document or a "
                                                 "project update): cardloop acts on comments on issues"),
    # Jira Cloud and Server
    "jira/recorded/issue_updated_status.json": [
        ("transition", "TEST-1", "To Do", "In Progress", "coding", None, "James Williams")],
    "jira/recorded/issue_updated_priority.json": IGNORED_JIRA_EDIT,
    # TEST-1 moved to project OPS (no status change): an edit of the card under its new key
    "jira/recorded/issue_updated_project_move.json": [("edit", "OPS-3", None, None, None, None, "James Williams")],
    "jira/recorded/comment_created.json": [("comment", "ZUL-1", None, None, None, None, "Eeshan Garg")],
    "jira/recorded/comment_created_without_issue.json": ("Jira comment_created without its issue: cardloop cannot "
                                                         "tell which card it is on"),
    "jira/recorded/issue_deleted.json": [("archive", "BUG-15", None, None, None, "deleted", "Leo Franchi")],
    # Trello: "Intermediate" is no column of config.toml, so its move names no stage
    "trello/recorded/update_card_move.json": [
        ("transition", "r33ylX2Z", "Basics", "Intermediate", None, None, "TomaszKolek")],
    "trello/recorded/update_card_archive.json": [("archive", "9BduUcVQ", None, None, None, "archived", "TomaszKolek")],
    "trello/recorded/update_card_reopen.json": IGNORED_TRELLO_EDIT,
    "trello/recorded/update_card_desc.json": [("edit", "P2r0z66z", None, None, None, None, "Marco Matarazzo")],
    "trello/recorded/update_card_pos.json": IGNORED_TRELLO_EDIT,
    "trello/recorded/comment_card.json": [("comment", "xPKXoSTQ", None, None, None, None, "TomaszKolek")],
    "trello/recorded/delete_card.json": [("archive", "Rwk4EVy0", None, None, None, "deleted", "Frederic Lepied")],
    # No shortLink in this payload: the card's long id is all it names (its stable id: boards/identity.py).
    "trello/recorded/delete_card_without_shortlink.json": [
        ("archive", "53582e2da0fac5676a71428b", None, None, None, "deleted", "TomaszKolek")],
}


def test_every_recorded_payload_has_an_expectation() -> None:
    from .conftest import FIXTURES
    recorded = {str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/recorded/*.json")}
    assert recorded == set(EXPECTED)


@pytest.mark.parametrize("path", sorted(EXPECTED))
async def test_recorded_payload(adapters: dict[str, BoardAdapter], config: Config, path: str) -> None:
    assert summary(await deliver(adapters, config, path)) == EXPECTED[path]


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_recorded_payload_signed_with_another_secret_is_refused(adapters: dict[str, BoardAdapter],
                                                               path: str) -> None:
    board = path.split("/", 1)[0]
    body = fixture_bytes(path)
    headers = httpx.Headers(signed(board, body, secret="not-the-secret"))
    with pytest.raises(SignatureMismatch):
        adapters[board].verify(headers, body, SECRET, sent_at(board, body))


async def test_linear_recorded_events_in_full(adapters: dict[str, BoardAdapter], config: Config) -> None:
    [move] = await deliver(adapters, config, "linear/recorded/issue_update_state.json",
                           **{"linear-delivery": "0b9f0c6e-3f0e-4d0b-9d7b-2f4b8c1d7e11"})
    assert move.delivery_id == "0b9f0c6e-3f0e-4d0b-9d7b-2f4b8c1d7e11"
    assert move.title.startswith("This is regarding the outage that we faced on 11/12/22")
    assert move.url == ("https://linear.app/webhooks/issue/WEB-44/"
                        "this-is-regarding-the-outage-that-we-faced-on-111222-from-2000-to-2200")
    assert move.at == datetime.fromisoformat("2023-04-11T10:16:53.022Z").timestamp()   # data.updatedAt
    # No Linear-Delivery header and no webhookId (2023): the id and the event's time label it.
    [edit] = await deliver(adapters, config, "linear/recorded/issue_update_title.json")
    assert edit.delivery_id == "3443a709-f2b5-46f2-a136-a0445fd432be:2023-04-11T10:16:53.022Z"
    assert edit.title == move.title and edit.body is not None and edit.body.startswith("The outage that occurred")
    [comment] = await deliver(adapters, config, "linear/recorded/comment_create.json")
    assert comment.title == "Thorough Impact Analysis and Cost Realization"
    assert comment.comment is not None and comment.comment.startswith("Performing a thorough impact analysis")


async def test_jira_and_trello_recorded_events_in_full(adapters: dict[str, BoardAdapter], config: Config) -> None:
    [move] = await deliver(adapters, config, "jira/recorded/issue_updated_status.json")
    assert (move.title, move.body, move.url) == ("Fix That", "Fix That", "https://zulipp.atlassian.net/browse/TEST-1")
    [comment] = await deliver(adapters, config, "jira/recorded/comment_created.json")
    assert (comment.comment, comment.url) == ("Leaving a comment here! :)",
                                              "https://zulipintegrations.atlassian.net/browse/ZUL-1")
    [edit] = await deliver(adapters, config, "trello/recorded/update_card_desc.json")
    assert (edit.title, edit.body, edit.url) == ("New Card", "Changed Description", "https://trello.com/c/P2r0z66z")
    [comment] = await deliver(adapters, config, "trello/recorded/comment_card.json")
    assert (comment.comment, comment.delivery_id) == ("New comment", "5735bd3a54bf8d93c35149bb")


async def test_jira_changelog_named_by_field_id_only(adapters: dict[str, BoardAdapter]) -> None:
    # A changelog item whose `field` is a display name (not "summary") still counts by its fieldId.
    data = json.loads(fixture_bytes("jira/recorded/issue_updated_priority.json"))
    data["changelog"]["items"] = [{"field": "Summary", "fieldId": "summary", "fieldtype": "jira",
                                   "from": None, "fromString": "Fix This", "to": None, "toString": "Fix That"}]
    body = json.dumps(data).encode()
    [edit] = await adapters["jira"].parse(httpx.Headers({}), body)
    assert (edit.kind, edit.card_id, edit.title) == ("edit", "TEST-1", "Fix That")


async def test_recorded_payloads_carry_the_ids_a_move_keeps(adapters: dict[str, BoardAdapter], config: Config) -> None:
    """Beside the human id, each event carries the board's stable id for the card and the ids the
    delivery says it had: what leads a moved issue's new id to the card cardloop keeps."""
    [team] = await deliver(adapters, config, "linear/recorded/issue_update_team.json")
    [before] = await deliver(adapters, config, "linear/recorded/issue_update_state.json")
    assert (before.card_id, before.board_uid, before.was) == ("WEB-44", "3443a709-f2b5-46f2-a136-a0445fd432be", ())
    assert (team.card_id, team.board_uid, team.was) == ("OPS-7", before.board_uid, ("WEB-44",))
    [comment] = await deliver(adapters, config, "linear/recorded/comment_create.json")
    assert comment.board_uid == "f9a37fcf-eb52-44be-a52c-0477f70e9952"   # data.issue.id: the issue's, not the comment's
    [moved] = await deliver(adapters, config, "jira/recorded/issue_updated_project_move.json")
    [status] = await deliver(adapters, config, "jira/recorded/issue_updated_status.json")
    # Every Jira site numbers its issues from 10000: the id is qualified by the site's host.
    assert (status.card_id, status.board_uid, status.was) == ("TEST-1", "zulipp.atlassian.net:10000", ())
    assert (moved.card_id, moved.board_uid, moved.was) == ("OPS-3", "zulipp.atlassian.net:10000", ("TEST-1",))
    [other_site] = await deliver(adapters, config, "jira/recorded/comment_created.json")   # issue 10000 too
    assert other_site.board_uid is not None and other_site.board_uid.endswith(":10000")
    assert other_site.board_uid != status.board_uid
    assert moved.url == "https://zulipp.atlassian.net/browse/OPS-3"
    [deleted] = await deliver(adapters, config, "trello/recorded/delete_card_without_shortlink.json")
    [archived] = await deliver(adapters, config, "trello/recorded/update_card_archive.json")
    assert (archived.card_id, archived.board_uid) == ("9BduUcVQ", "53582e2da0fac5676a71428b")
    assert (deleted.card_id, deleted.board_uid) == ("53582e2da0fac5676a71428b", archived.board_uid)


async def test_odd_stable_and_former_ids_cost_the_delivery_nothing(adapters: dict[str, BoardAdapter]) -> None:
    """A stable id that is no id (an object, a text with spaces) and former ids a key cannot hold
    are left out: the event is answered by its human id alone, as before."""
    data = json.loads(fixture_bytes("linear/recorded/issue_update_team.json"))
    data["data"]["id"] = {"not": "an id"}
    data["data"]["previousIdentifiers"] = ["WEB 44", 7, None, "WEB-44", "WEB-44"]
    [event] = await adapters["linear"].parse(httpx.Headers({"linear-delivery": "ld-odd"}), json.dumps(data).encode())
    assert (event.card_id, event.board_uid, event.was) == ("OPS-7", None, ("WEB-44",))
    data["data"]["id"] = "has spaces in it"
    data["data"]["previousIdentifiers"] = "WEB-44"   # not a list
    [event] = await adapters["linear"].parse(httpx.Headers({"linear-delivery": "ld-odd"}), json.dumps(data).encode())
    assert (event.board_uid, event.was) == (None, ())
    jira = json.loads(fixture_bytes("jira/recorded/issue_updated_project_move.json"))
    jira["changelog"]["items"][1]["fromString"] = None      # a Key item without the old key
    jira["issue"]["id"] = 10000                              # a number, not a string: the same id
    [edit] = await adapters["jira"].parse(httpx.Headers({}), json.dumps(jira).encode())
    assert (edit.kind, edit.card_id, edit.board_uid, edit.was) == ("edit", "OPS-3", "zulipp.atlassian.net:10000", ())
    jira["issue"]["self"] = "http://[not-a-host/rest/api/2/issue/10000"   # no host to qualify it with
    [edit] = await adapters["jira"].parse(httpx.Headers({}), json.dumps(jira).encode())
    assert edit.board_uid == "10000"
