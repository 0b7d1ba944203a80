"""Linear: issue state changes and new comments.

    type      action   result
    Issue     update   archive when `updatedFrom` has `archivedAt` and data.archivedAt is set (the
                       issue was archived), else transition when `updatedFrom.stateId` is present
                       (the state changed), else edit when `updatedFrom` has `title` or
                       `description` (renamed, edited)
    Issue     remove   archive (the issue was deleted)
    Comment   create   comment on data.issue.identifier
    others             Ignored

The payload names only the previous state's id, not its name, so `from_column` is None; the new
state's name is data.state.name. The tenant key is the payload's organizationId.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from cardloop.app.boards.events import BoardEvent, Ignored
from cardloop.app.boards.payload import event, header, load_object, lookup, opt_obj, opt_str, req_str, short
from cardloop.app.boards.replay import canonical_without, iso_time
from cardloop.app.boards.signatures import verify_linear
from cardloop.contracts.config import BoardConfig


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
        # Without the header, the webhook id and the event's creation time identify one delivery.
        return f"{req_str(data, 'webhookId')}:{req_str(data, 'createdAt')}"

    def _actor(self, data: dict[str, Any]) -> str | None:
        return opt_str(data, "actor.name") or opt_str(data, "actor.email")

    def _issue_update(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        updated_from = opt_obj(data, "updatedFrom")
        # Archived: archivedAt went from null to a time (an un-archive sets it back to null).
        if updated_from is not None and "archivedAt" in updated_from and opt_str(data, "data.archivedAt"):
            return [self._archive(headers, data, "archived")]
        moved = updated_from is not None and lookup(updated_from, "stateId") is not None
        if not moved and not (updated_from is not None and {"title", "description"} & updated_from.keys()):
            return Ignored(reason="Linear issue update did not change its state, title or description")
        issue = opt_obj(data, "data")
        if not moved:
            return [event(
                kind="edit", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
                card_id=req_str(data, "data.identifier"), delivery_id=self._delivery(headers, data),
                title=opt_str(issue, "title"), body=opt_str(issue, "description"),
                url=opt_str(issue, "url") or opt_str(data, "url"), actor=self._actor(data),
            )]
        to_column = req_str(data, "data.state.name")
        return [event(
            kind="transition", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
            card_id=req_str(data, "data.identifier"), delivery_id=self._delivery(headers, data),
            to_column=to_column, stage=self.board.stage_for(to_column),
            title=opt_str(issue, "title"), body=opt_str(issue, "description"),
            url=opt_str(issue, "url") or opt_str(data, "url"), branch=opt_str(issue, "branchName"),
            actor=self._actor(data), at=iso_time(data, "data.updatedAt"),
        )]

    def _archive(self, headers: Mapping[str, str], data: dict[str, Any],
                 gone: Literal["archived", "deleted"]) -> BoardEvent:
        return event(
            kind="archive", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
            card_id=req_str(data, "data.identifier"), delivery_id=self._delivery(headers, data),
            url=opt_str(data, "data.url") or opt_str(data, "url"), actor=self._actor(data), gone=gone,
        )

    def _comment(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        text = opt_str(data, "data.body")
        if not text or not text.strip():
            return Ignored(reason="empty comment")
        return [event(
            kind="comment", board=self.name, tenant=self.board.named_tenant(opt_str(data, "organizationId")),
            card_id=req_str(data, "data.issue.identifier"), delivery_id=self._delivery(headers, data),
            title=opt_str(data, "data.issue.title"), url=opt_str(data, "data.issue.url"),
            actor=self._actor(data) or opt_str(data, "data.user.name"), comment=text,
        )]
