"""Linear: comments (GraphQL `commentCreate`), the issue's workflow state (`issueUpdate` with the
state id resolved by name among the issue's team's states) and a label (by name, team's or
workspace's). Every write reads the issue first: its comments for the marker, its state, its
labels. The marker is a plain last line (`cardloop:<marker>`): Linear's editor keeps no HTML.
Only a comment by the key's own user (`viewer`) is found by its marker: a person's comment that
carries one is theirs."""

from __future__ import annotations

from typing import Any

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.board_clients.base import (
    BoardCard,
    Http,
    Written,
    has_line,
    plain_marker,
    same_name,
    with_line,
)
from cardloop.integrations.upstream import UpstreamError

API_URL = "https://api.linear.app/graphql"
MAX_BODY = 100_000

ISSUE = """
query($id: String!) {
  issue(id: $id) {
    id identifier
    state { id name }
    labels { nodes { id name } }
    team { id states { nodes { id name } } labels { nodes { id name } } }
    comments(first: 250) { nodes { id body user { id } } }
  }
  viewer { id }
}"""
COMMENT_CREATE = """
mutation($issueId: String!, $body: String!) {
  commentCreate(input: {issueId: $issueId, body: $body}) { success comment { id } }
}"""
ISSUE_UPDATE = """
mutation($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success issue { id state { name } } }
}"""


class LinearBoard:
    board = "linear"

    def __init__(self, api_url: str, api_key: Secret | str, *, timeout: float = 30.0) -> None:
        key = reveal(api_key) or ""
        # A personal API key goes as it is; an OAuth token (lin_oauth_...) as a bearer token.
        auth = f"Bearer {key}" if key.startswith("lin_oauth_") else key
        self.http = Http("Linear", api_url or API_URL, {"Authorization": auth}, secret=key, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _issue(self, card: BoardCard) -> dict[str, Any]:
        data = self.http.graphql(ISSUE, {"id": card.card_id}, f"reading issue {card.card_id}")
        issue = data.get("issue")
        if not isinstance(issue, dict) or not issue.get("id"):
            raise UpstreamError(f"Linear has no issue {card.card_id}", kind="not_found", retryable=False)
        return {**issue, "_viewer": (data.get("viewer") or {}).get("id")}

    def comment(self, card: BoardCard, *, body: str, marker: str) -> Written:
        line = plain_marker(marker)
        issue = self._issue(card)
        me = issue.get("_viewer")
        for c in (issue.get("comments") or {}).get("nodes") or []:
            if has_line(c.get("body"), line) and me and (c.get("user") or {}).get("id") == me:
                return Written(done=f"comment on {card.card_id} was there", acted=False, target=card.card_id)
        done = self.http.graphql(COMMENT_CREATE, {"issueId": issue["id"], "body": with_line(body, line, MAX_BODY)},
                                 f"commenting on {card.card_id}")
        _success(done, "commentCreate", f"commenting on {card.card_id}")
        return Written(done=f"commented on {card.card_id}", target=card.card_id)

    def move(self, card: BoardCard, column: str, *, key: str = "") -> Written:
        issue = self._issue(card)
        current = (issue.get("state") or {}).get("name")
        if same_name(current, column):
            return Written(done=f"{card.card_id} already in {column!r}", acted=False, target=card.card_id)
        states = ((issue.get("team") or {}).get("states") or {}).get("nodes") or []
        state = next((s for s in states if same_name(s.get("name"), column)), None)
        if state is None:
            names = ", ".join(repr(s.get("name")) for s in states) or "none"
            raise UpstreamError(f"the team of {card.card_id} has no workflow state {column!r} (states: {names})",
                                kind="invalid_request", retryable=False)
        done = self.http.graphql(ISSUE_UPDATE, {"id": issue["id"], "input": {"stateId": state["id"]}},
                                 f"moving {card.card_id} to {column!r}")
        _success(done, "issueUpdate", f"moving {card.card_id}")
        return Written(done=f"moved {card.card_id} from {current!r} to {column!r}", target=card.card_id)

    def label(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        issue = self._issue(card)
        have = (issue.get("labels") or {}).get("nodes") or []
        if any(same_name(x.get("name"), label) for x in have):
            return Written(done=f"{card.card_id} already has label {label!r}", acted=False, target=card.card_id)
        labels = ((issue.get("team") or {}).get("labels") or {}).get("nodes") or []
        found = next((x for x in labels if same_name(x.get("name"), label)), None)
        if found is None:
            raise UpstreamError(f"the team of {card.card_id} has no label {label!r}", kind="invalid_request",
                                retryable=False)
        ids = [x["id"] for x in have if x.get("id")] + [found["id"]]
        done = self.http.graphql(ISSUE_UPDATE, {"id": issue["id"], "input": {"labelIds": ids}},
                                 f"labelling {card.card_id}")
        _success(done, "issueUpdate", f"labelling {card.card_id}")
        return Written(done=f"labelled {card.card_id} {label!r}", target=card.card_id)

    def unlabel(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        issue = self._issue(card)
        have = (issue.get("labels") or {}).get("nodes") or []
        if not any(same_name(x.get("name"), label) for x in have):
            return Written(done=f"{card.card_id} has no label {label!r}", acted=False, target=card.card_id)
        ids = [x["id"] for x in have if x.get("id") and not same_name(x.get("name"), label)]
        done = self.http.graphql(ISSUE_UPDATE, {"id": issue["id"], "input": {"labelIds": ids}},
                                 f"removing label {label!r} from {card.card_id}")
        _success(done, "issueUpdate", f"removing a label from {card.card_id}")
        return Written(done=f"removed label {label!r} from {card.card_id}", target=card.card_id)


def _success(data: dict[str, Any], name: str, doing: str) -> None:
    if not (data.get(name) or {}).get("success"):
        raise UpstreamError(f"Linear answered {name} without success while {doing}", kind="bad_response",
                            retryable=True)
