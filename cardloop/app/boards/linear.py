"""Linear: issue state changes and new comments.

    type      action   result
    Issue     update   archive when `updatedFrom` has `archivedAt` and data.archivedAt is set (the
                       issue was archived), else transition when `updatedFrom.stateId` is present
                       (the state changed), else edit when `updatedFrom` has `title` or
                       `description` (renamed, edited) or `teamId` or `number` (moved to another
                       team: a new identifier)
    Issue     remove   archive (the issue was deleted)
    Comment   create   comment on the issue (Ignored: a comment on a document or project update)
    others             Ignored

The payload names only the previous state's id, not its name, so `from_column` is None; the new
state's name is data.state.name. The tenant key is the payload's organizationId.

The card is the issue's identifier (ENG-123). Linear's current schema carries it (data.identifier,
a comment's data.issue.identifier); payloads Linear sent before it did (recorded in
tests/fixtures/linear/recorded) carry the team key and number, or only the issue's URL
(https://linear.app/ORG/issue/ENG-123/slug, a comment's ...#comment-id), which name the same one.
An issue moved to another team gets a new identifier (ENG-123 -> OPS-45): every event also carries
the issue's UUID (data.id; a comment's data.issue.id or data.issueId), which the move keeps, and the
identifiers it had (data.previousIdentifiers), so the card it already is stays the card
(boards/identity.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from cardloop.app.boards.events import BoardEvent, Ignored
from cardloop.app.boards.payload import (
    bad,
    event,
    finite_number,
    former_ids,
    header,
    load_object,
    lookup,
    opt_obj,
    opt_str,
    req_str,
    short,
    stable_id,
)
from cardloop.app.boards.replay import canonical_without, iso_time
from cardloop.app.boards.signatures import verify_linear
from cardloop.contracts.config import BoardConfig

# The identifier in an issue's URL: /issue/ENG-123 followed by its slug, a comment anchor or nothing.
_ISSUE_URL = re.compile(r"/issue/([A-Za-z0-9_]+-[0-9]+)(?:[/#?]|\Z)")
# `updatedFrom` keys of a move to another team: the issue's number and identifier change with it.
_TEAM_MOVE = frozenset({"teamId", "number", "identifier", "previousIdentifiers"})


def issue_identifier(issue: dict[str, Any] | None, *urls: str | None) -> str | None:
    """ENG-123: the issue's `identifier`, else its team key and number, else the first of `urls`
    that names an issue; None when none does."""
    if issue is not None:
        identifier = opt_str(issue, "identifier")
        if identifier:
            return identifier
        key, number = opt_str(issue, "team.key"), finite_number(lookup(issue, "number"))
        if key and number is not None and number.is_integer() and number > 0:
            return f"{key}-{int(number)}"
    for url in urls:
        found = _ISSUE_URL.search(url) if url else None
        if found:
            return found.group(1)
    return None


class LinearAdapter:
    name = "linear"
    secret_env = "CARDLOOP_LINEAR_WEBHOOK_SECRET"

    def __init__(self, board: BoardConfig) -> None:
        self.board = board

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None:
        verify_linear(headers, body, secret, now)

    def signed_content(self, body: bytes) -> bytes:
        # webhookTimestamp is the send time: a retry of the same event carries a new one.
        return canonical_without(body, "webhookTimestamp")

    def event_time(self, headers: Mapping[str, str], body: bytes) -> float | None:
        return None  # verify already holds webhookTimestamp to 60 s

    async def parse(self, headers: Mapping[str, str], body: bytes) -> list[BoardEvent] | Ignored:
        data = load_object(body)
        kind, action = opt_str(data, "type"), opt_str(data, "action")
        if kind == "Issue" and action == "remove":
            return [self._archive(headers, data, "deleted")]
        if kind == "Issue" and action == "update":
            return self._issue_update(headers, data)
        if kind == "Comment" and action == "create":
            return self._comment(headers, data)
        return Ignored(reason=f"Linear {short(kind)} {short(action)}: cardloop acts on issue state changes, "
                              "archived and deleted issues, and new comments")

    def _delivery(self, headers: Mapping[str, str], data: dict[str, Any]) -> str:
        delivery = header(headers, "Linear-Delivery")
        if delivery:
            return delivery
        # Without the header, the webhook id (or, in payloads from before Linear sent one, the
        # entity's id) and the event's creation time label one delivery.
        sender = opt_str(data, "webhookId") or opt_str(data, "data.id")
        if not sender:
            raise bad("missing webhookId")
        return f"{sender}:{req_str(data, 'createdAt')}"

    def _issue_id(self, data: dict[str, Any]) -> str:
        found = issue_identifier(opt_obj(data, "data"), opt_str(data, "data.url"), opt_str(data, "url"))
        if found is None:
            raise bad("missing data.identifier")
        return found

    def _actor(self, data: dict[str, Any]) -> str | None:
        return opt_str(data, "actor.name") or opt_str(data, "actor.email")

    def _issue_update(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        updated_from = opt_obj(data, "updatedFrom")
        # Archived: archivedAt went from null to a time (an un-archive sets it back to null).
        if updated_from is not None and "archivedAt" in updated_from and opt_str(data, "data.archivedAt"):
            return [self._archive(headers, data, "archived")]
        moved = updated_from is not None and lookup(updated_from, "stateId") is not None
        changed = {"title", "description"} | _TEAM_MOVE
        if not moved and not (updated_from is not None and changed & updated_from.keys()):
            return Ignored(reason="Linear issue update did not change its state, title, description or team")
        issue = opt_obj(data, "data")
        if not moved:
            return [event(
                kind="edit", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
                card_id=self._issue_id(data), delivery_id=self._delivery(headers, data),
                title=opt_str(issue, "title"), body=opt_str(issue, "description"),
                url=opt_str(issue, "url") or opt_str(data, "url"), actor=self._actor(data), **self._ids(data),
            )]
        to_column = req_str(data, "data.state.name")
        return [event(
            kind="transition", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
            card_id=self._issue_id(data), delivery_id=self._delivery(headers, data),
            to_column=to_column, stage=self.board.stage_for(to_column),
            title=opt_str(issue, "title"), body=opt_str(issue, "description"),
            url=opt_str(issue, "url") or opt_str(data, "url"), branch=opt_str(issue, "branchName"),
            actor=self._actor(data), at=iso_time(data, "data.updatedAt"), **self._ids(data),
        )]

    def _ids(self, data: dict[str, Any]) -> dict[str, Any]:
        """An issue event's stable id (the UUID a team move keeps) and its former identifiers:
        data.previousIdentifiers, and updatedFrom.identifier when Linear names the old one there."""
        before = lookup(data, "updatedFrom.identifier") if isinstance(data.get("updatedFrom"), dict) else None
        listed = lookup(data, "data.previousIdentifiers") if isinstance(data.get("data"), dict) else None
        was = former_ids([*(listed if isinstance(listed, list) else []), before])
        return {"board_uid": stable_id(data, "data.id"), "was": was}

    def _archive(self, headers: Mapping[str, str], data: dict[str, Any],
                 gone: Literal["archived", "deleted"]) -> BoardEvent:
        return event(
            kind="archive", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
            card_id=self._issue_id(data), delivery_id=self._delivery(headers, data),
            url=opt_str(data, "data.url") or opt_str(data, "url"), actor=self._actor(data), gone=gone,
            **self._ids(data),
        )

    def _comment(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        issue = opt_obj(data, "data.issue")
        card_id = issue_identifier(issue, opt_str(issue, "url"), opt_str(data, "url"))
        if card_id is None:
            if issue is None and opt_str(data, "data.issueId") is None:
                # Comments on documents, project updates and initiatives come as type Comment too.
                return Ignored(reason="Linear comment on something other than an issue (a document or a "
                                      "project update): cardloop acts on comments on issues")
            raise bad("missing data.issue.identifier")
        text = opt_str(data, "data.body")
        if not text or not text.strip():
            return Ignored(reason="empty comment")
        return [event(
            kind="comment", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
            card_id=card_id, delivery_id=self._delivery(headers, data),
            title=opt_str(data, "data.issue.title"), url=opt_str(data, "data.issue.url"),
            actor=self._actor(data) or opt_str(data, "data.user.name"), comment=text,
            board_uid=stable_id(data, "data.issue.id", "data.issueId"),
        )]
