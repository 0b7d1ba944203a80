"""Jira Cloud (REST v3): a comment (ADF body), a transition to the status named by the column
(resolved among the issue's available transitions by their target status), and a label.
Every write reads first: the issue's comments for the marker, its status, its labels. The
credential is `email:api-token` (basic auth); the marker is the comment's last paragraph, and
only a comment by the credential's own account (GET /myself) is found by it."""

from __future__ import annotations

import base64
from typing import Any

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.board_clients.base import (
    BoardCard,
    Http,
    Written,
    defuse_markers,
    has_line,
    plain_marker,
    same_name,
)
from cardloop.integrations.upstream import UpstreamError

MAX_BODY = 32_000  # Jira's comment limit is 32,767 characters


def adf(text: str) -> dict[str, Any]:
    """Plain text as an Atlassian Document: one paragraph per block, line breaks kept."""
    content = []
    for block in text.split("\n\n"):
        nodes: list[dict[str, Any]] = []
        for i, line in enumerate(block.split("\n")):
            if i:
                nodes.append({"type": "hardBreak"})
            if line:
                nodes.append({"type": "text", "text": line})
        if nodes:
            content.append({"type": "paragraph", "content": nodes})
    return {"type": "doc", "version": 1, "content": content}


def adf_text(doc: Any) -> str:
    """An Atlassian Document's text: each paragraph a line, hard breaks as line breaks, a
    blockquote's lines after "> " (a person quoting our comment has not posted it: its marker
    line, quoted, is not the one has_line looks for)."""
    if isinstance(doc, str):
        return doc
    if not isinstance(doc, dict):
        return ""
    if doc.get("type") == "text":
        return str(doc.get("text", ""))
    if doc.get("type") == "hardBreak":
        return "\n"
    inner = "".join(adf_text(c) for c in doc.get("content") or [])
    if doc.get("type") == "blockquote":
        return "".join(f"> {line}\n" for line in inner.splitlines())
    return inner + "\n" if doc.get("type") == "paragraph" else inner


class JiraBoard:
    board = "jira"

    def __init__(self, site_url: str, credential: Secret | str, *, timeout: float = 30.0) -> None:
        raw = reveal(credential) or ""
        email, sep, token = raw.partition(":")
        if not sep or not email or not token:
            raise ValueError("the Jira credential is 'email:api-token'")
        basic = base64.b64encode(raw.encode()).decode()
        self.http = Http("Jira", site_url, {"Authorization": f"Basic {basic}", "Accept": "application/json"},
                         secret=token, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _me(self) -> str:
        """The credential's account id: whose comments are cardloop's."""
        found = self.http.json("GET", "/rest/api/3/myself", "reading whose credential this is") or {}
        me = found.get("accountId") if isinstance(found, dict) else None
        if not me:
            raise UpstreamError("Jira named no account for the credential", kind="bad_response", retryable=True)
        return str(me)

    def comment(self, card: BoardCard, *, body: str, marker: str) -> Written:
        key, line = card.card_id, plain_marker(marker)
        path = f"/rest/api/3/issue/{key}/comment"
        me = ""  # asked only when a comment carries the marker
        start = 0
        while True:
            page = self.http.json("GET", path, f"reading the comments of {key}",
                                  params={"startAt": start, "maxResults": 100}) or {}
            comments = page.get("comments") or []
            marked = [c for c in comments if has_line(adf_text(c.get("body")), line)]
            me = me or (self._me() if marked else "")
            if any((c.get("author") or {}).get("accountId") == me for c in marked):
                return Written(done=f"comment on {key} was there", acted=False, target=key)
            start += len(comments)
            if not comments or start >= int(page.get("total") or 0):
                break
        text = defuse_markers("\n".join(x for x in body.splitlines() if x.strip() != line))
        text = text if len(text) <= MAX_BODY else text[:MAX_BODY] + "\n\n[… cut …]"
        self.http.json("POST", path, f"commenting on {key}", json={"body": adf(f"{text}\n\n{line}")})
        return Written(done=f"commented on {key}", target=key)

    def move(self, card: BoardCard, column: str, *, key: str = "") -> Written:
        key = card.card_id
        issue = self.http.json("GET", f"/rest/api/3/issue/{key}", f"reading the status of {key}",
                               params={"fields": "status"}) or {}
        current = ((issue.get("fields") or {}).get("status") or {}).get("name")
        if same_name(current, column):
            return Written(done=f"{key} already in {column!r}", acted=False, target=key)
        path = f"/rest/api/3/issue/{key}/transitions"
        found = (self.http.json("GET", path, f"reading the transitions of {key}") or {}).get("transitions") or []
        move = next((t for t in found if same_name((t.get("to") or {}).get("name"), column)), None)
        if move is None:
            names = ", ".join(repr((t.get("to") or {}).get("name")) for t in found) or "none"
            raise UpstreamError(f"{key} has no transition from {current!r} to {column!r} (reachable: {names})",
                                kind="invalid_request", retryable=False)
        self.http.json("POST", path, f"moving {key} to {column!r}", json={"transition": {"id": move["id"]}})
        return Written(done=f"moved {key} from {current!r} to {column!r}", target=key)

    def label(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        key = card.card_id
        label = "-".join(label.split())  # Jira labels cannot hold spaces
        issue = self.http.json("GET", f"/rest/api/3/issue/{key}", f"reading the labels of {key}",
                               params={"fields": "labels"}) or {}
        if label in ((issue.get("fields") or {}).get("labels") or []):
            return Written(done=f"{key} already has label {label!r}", acted=False, target=key)
        self.http.json("PUT", f"/rest/api/3/issue/{key}", f"labelling {key}",
                       json={"update": {"labels": [{"add": label}]}})
        return Written(done=f"labelled {key} {label!r}", target=key)

    def unlabel(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        key_ = card.card_id
        label = "-".join(label.split())
        issue = self.http.json("GET", f"/rest/api/3/issue/{key_}", f"reading the labels of {key_}",
                               params={"fields": "labels"}) or {}
        if label not in ((issue.get("fields") or {}).get("labels") or []):
            return Written(done=f"{key_} has no label {label!r}", acted=False, target=key_)
        self.http.json("PUT", f"/rest/api/3/issue/{key_}", f"removing label {label!r} from {key_}",
                       json={"update": {"labels": [{"remove": label}]}})
        return Written(done=f"removed label {label!r} from {key_}", target=key_)

