"""Jira Cloud: status changes and new comments.

    webhookEvent         result
    jira:issue_updated   transition when a changelog item's field is "status" (fromString -> toString),
                         else edit when one is "summary" or "description" (renamed, edited), or
                         "Key" or "project" (moved to another project: a new key)
    jira:issue_deleted   archive (the issue was deleted)
    comment_created      comment on issue.key (Ignored when the payload carries no issue: Jira sends
                         some with the comment alone, whose issue id names no card)
    others               Ignored

A changelog item names its field by `fieldId` (Jira Cloud) and `field` (also older Jira and
Server); either counts.

The tenant key is the issue's project key (issue.fields.project.key).

An issue moved to another project gets a new key (PROJ-1 -> OTHER-7): the delivery's issue.key is
the new one, a changelog item on `Key` names the old one (fromString), and every event carries the
issue's numeric id (issue.id, with its site's host: acme.atlassian.net:10142), which the move keeps,
so the card it already is stays the card (boards/identity.py). A move to a project that
`[boards.jira.tenants]` maps to another tenant is that tenant's claim, refused (403) as any other:
a card never crosses tenants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cardloop.app.boards.events import BoardEvent, Ignored
from cardloop.app.boards.payload import (
    bad,
    event,
    former_ids,
    header,
    kind,
    load_object,
    lookup,
    opt_list,
    opt_obj,
    opt_str,
    req_int,
    req_str,
    short,
    stable_id,
)
from cardloop.app.boards.replay import json_object, number_time
from cardloop.app.boards.signatures import verify_jira
from cardloop.contracts.config import BoardConfig

_ADF_MAX_NODES = 10_000


class _Quote(int):
    """A stack entry of adf_text: entering (+1) or leaving (-1) a blockquote."""


def adf_text(doc: Any) -> str:
    """Plain text of an Atlassian Document Format tree (what REST v3 returns for descriptions and
    comments); blocks end with newlines, and a blockquote's lines start with "> " as in markdown,
    so quoted text stays quoted (a reply quoting cardloop's comment is not cardloop's comment).
    Walked iteratively: a hostile tree may nest deeply."""
    pieces: list[tuple[str, int]] = []   # text and the blockquote depth it was written at
    stack: list[Any] = [doc]
    depth = seen = 0
    while stack and seen < _ADF_MAX_NODES:
        node = stack.pop()
        seen += 1
        if isinstance(node, _Quote):
            depth += node
            continue
        if isinstance(node, str):  # a block's closing newline, pushed below
            pieces.append((node, depth))
            continue
        if not isinstance(node, dict):
            continue
        if node.get("type") == "text" and isinstance(node.get("text"), str):
            pieces.append((node["text"], depth))
        elif node.get("type") == "hardBreak":
            pieces.append(("\n", depth))
        children = node.get("content")
        if isinstance(children, list):
            if node.get("type") in ("paragraph", "heading", "listItem", "codeBlock", "blockquote"):
                stack.append("\n")
            quote = node.get("type") == "blockquote"
            if quote:
                stack.append(_Quote(-1))   # popped after the children: the quote ends
            stack.extend(reversed(children))
            if quote:
                stack.append(_Quote(1))    # popped first: the quote starts
    return _quoted_lines(pieces).strip()


def _quoted_lines(pieces: list[tuple[str, int]]) -> str:
    """The pieces joined, each line prefixed with "> " once per blockquote its first text is in."""
    lines: list[str] = []
    line: list[str] = []
    depth: int | None = None
    for text, at in pieces:
        for i, part in enumerate(text.split("\n")):
            if i:
                lines.append("> " * (depth or 0) + "".join(line))
                line, depth = [], None
            if part:
                depth = at if depth is None else depth
                line.append(part)
    lines.append("> " * (depth or 0) + "".join(line))
    return "\n".join(lines)


def _text(data: Any, path: str) -> str | None:
    """A rich-text field: a string (REST v2, what webhooks send) or an ADF document."""
    value = lookup(data, path)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return adf_text(value) or None
    raise bad(f"{path} must be a string or a document, got {kind(value)}")


def browse_url(issue_self: str | None, key: str) -> str | None:
    """https://SITE/browse/KEY from the issue's REST URL (https://SITE/rest/api/2/issue/ID)."""
    if not issue_self or "/rest/api/" not in issue_self:
        return None
    return f"{issue_self.split('/rest/api/', 1)[0]}/browse/{key}"


def _issue_uid(data: dict[str, Any]) -> str | None:
    """The issue's numeric id, which a move to another project keeps, qualified by its site's host
    (from issue.self): every Jira site numbers its issues from 10000, so a bare id would lead one
    site's issue to another site's card on the same board."""
    issue_id = stable_id(data, "issue.id")
    issue_self = lookup(data, "issue.self") if isinstance(data.get("issue"), dict) else None
    try:
        host = urlsplit(issue_self).hostname if isinstance(issue_self, str) else None
    except ValueError:   # a malformed URL (an unclosed "[" host): the bare id
        host = None
    return f"{host}:{issue_id}" if issue_id and host else issue_id


def _names(item: dict[str, Any], *names: str) -> bool:
    """Whether a changelog item is about one of `names`, by its `field` or its `fieldId`."""
    return item.get("field") in names or item.get("fieldId") in names


class JiraAdapter:
    name = "jira"
    secret_env = "CARDLOOP_JIRA_WEBHOOK_SECRET"

    def __init__(self, board: BoardConfig) -> None:
        self.board = board

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None:
        verify_jira(headers, body, secret)

    def signed_content(self, body: bytes) -> bytes:
        return body

    def event_time(self, headers: Mapping[str, str], body: bytes) -> float | None:
        return number_time(json_object(body), "timestamp", per_second=1000.0)

    async def parse(self, headers: Mapping[str, str], body: bytes) -> list[BoardEvent] | Ignored:
        data = load_object(body)
        webhook_event = opt_str(data, "webhookEvent")
        if webhook_event == "jira:issue_updated":
            return self._issue_updated(headers, data)
        if webhook_event == "comment_created":
            return self._comment(headers, data)
        if webhook_event == "jira:issue_deleted":
            return [event(kind="archive", **self._common(headers, data), actor=opt_str(data, "user.displayName"),
                          gone="deleted")]
        return Ignored(reason=f"Jira event {short(webhook_event)}: cardloop acts on status changes, deleted issues "
                              "and new comments")

    def _delivery(self, headers: Mapping[str, str], data: dict[str, Any], key: str) -> str:
        delivery = header(headers, "X-Atlassian-Webhook-Identifier")
        if delivery:
            return delivery
        # Jira keeps this header across retries; without it the event, its time and the issue do.
        return f"{req_str(data, 'webhookEvent')}:{req_int(data, 'timestamp')}:{key}"

    def _common(self, headers: Mapping[str, str], data: dict[str, Any]) -> dict[str, Any]:
        key = req_str(data, "issue.key")
        return {
            "board": self.name,
            "tenant": self.board.named_tenant(opt_str(data, "issue.fields.project.key")),
            "card_id": key,
            "delivery_id": self._delivery(headers, data, key),
            "title": opt_str(data, "issue.fields.summary"),
            "url": browse_url(opt_str(data, "issue.self"), key),
            "board_uid": _issue_uid(data),
        }

    def _issue_updated(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        status = None
        old_keys: list[Any] = []
        for i, item in enumerate(opt_list(data, "changelog.items")):
            if not isinstance(item, dict):
                raise bad(f"changelog.items.{i} must be an object, got {kind(item)}")
            if item.get("field") == "status" or item.get("fieldId") == "status":
                status = (opt_str(item, "fromString"), req_str(data, f"changelog.items.{i}.toString"))
            if _names(item, "Key", "key", "issuekey"):   # a move to another project: the key it had
                old_keys.append(item.get("fromString"))
        was = former_ids(old_keys)
        if status is None:
            # Only names: a sender's list or object there is no field name (and would not hash).
            fields = {item.get(name) for item in opt_list(data, "changelog.items") if isinstance(item, dict)
                      for name in ("field", "fieldId") if isinstance(item.get(name), str)}
            if fields & {"summary", "description", "project"} or was:
                return [event(kind="edit", **self._common(headers, data), was=was,
                              body=_text(data, "issue.fields.description"), actor=opt_str(data, "user.displayName"))]
            return Ignored(reason="Jira issue update did not change its status, summary, description or project")
        from_column, to_column = status
        return [event(
            kind="transition", **self._common(headers, data), from_column=from_column, to_column=to_column,
            stage=self.board.stage_for(to_column), body=_text(data, "issue.fields.description"),
            actor=opt_str(data, "user.displayName"), was=was,
        )]

    def _comment(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        if opt_obj(data, "issue") is None:
            # Only comment.self (.../issue/10000/comment/12000) says where it was made: an issue id,
            # not the key that names the card, and nothing to ask Jira with.
            return Ignored(reason="Jira comment_created without its issue: cardloop cannot tell which card it is on")
        text = _text(data, "comment.body")
        if not text or not text.strip():
            return Ignored(reason="empty comment")
        return [event(
            kind="comment", **self._common(headers, data),
            actor=opt_str(data, "comment.author.displayName"), comment=text,
        )]
