"""Trello: a comment (the card's commentCard action), a move to the list named by the column
(resolved by name among the board's lists) and a label (by name among the board's labels).
Every write reads first: the card's comments for the marker, its list, its labels. The
credential is `API key:token`, sent in Trello's OAuth header, never in a URL."""

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

API_URL = "https://api.trello.com/1"
MAX_BODY = 16_384  # Trello's comment limit


class TrelloBoard:
    board = "trello"

    def __init__(self, api_url: str, credential: Secret | str, *, timeout: float = 30.0) -> None:
        raw = reveal(credential) or ""
        key, sep, token = raw.partition(":")
        if not sep or not key or not token:
            raise ValueError("the Trello credential is 'API key:token'")
        auth = f'OAuth oauth_consumer_key="{key}", oauth_token="{token}"'
        self.http = Http("Trello", api_url or API_URL, {"Authorization": auth}, secret=token, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _card(self, card: BoardCard, fields: str) -> dict[str, Any]:
        found = self.http.json("GET", f"/cards/{card.card_id}", f"reading card {card.card_id}",
                               params={"fields": fields})
        if not isinstance(found, dict) or not found.get("id"):
            raise UpstreamError(f"Trello has no card {card.card_id}", kind="not_found", retryable=False)
        return found

    def comment(self, card: BoardCard, *, body: str, marker: str) -> Written:
        cid, line = card.card_id, plain_marker(marker)
        actions = self.http.json("GET", f"/cards/{cid}/actions", f"reading the comments of card {cid}",
                                 params={"filter": "commentCard", "limit": 1000}) or []
        marked = [a for a in actions if isinstance(a, dict) and has_line((a.get("data") or {}).get("text"), line)]
        if marked:  # whose token this is, asked only when a comment carries the marker
            me = self.http.json("GET", "/members/me", "reading whose token this is", params={"fields": "id"}) or {}
            mine = me.get("id") if isinstance(me, dict) else None
            marked = [a for a in marked if mine and a.get("idMemberCreator") == mine]
        if marked:
            return Written(done=f"comment on card {cid} was there", acted=False, target=cid)
        self.http.json("POST", f"/cards/{cid}/actions/comments", f"commenting on card {cid}",
                       data={"text": with_line(body, line, MAX_BODY)})
        return Written(done=f"commented on card {cid}", target=cid)

    def move(self, card: BoardCard, column: str, *, key: str = "") -> Written:
        found = self._card(card, "idList,idBoard")
        lists = self.http.json("GET", f"/boards/{found['idBoard']}/lists",
                               f"reading the lists of card {card.card_id}'s board", params={"fields": "name"}) or []
        current = next((x.get("name") for x in lists if x.get("id") == found.get("idList")), None)
        if same_name(current, column):
            return Written(done=f"card {card.card_id} already in {column!r}", acted=False, target=card.card_id)
        target = next((x for x in lists if same_name(x.get("name"), column)), None)
        if target is None:
            names = ", ".join(repr(x.get("name")) for x in lists) or "none"
            raise UpstreamError(f"the board of card {card.card_id} has no list {column!r} (lists: {names})",
                                kind="invalid_request", retryable=False)
        self.http.json("PUT", f"/cards/{card.card_id}", f"moving card {card.card_id} to {column!r}",
                       data={"idList": target["id"]})
        return Written(done=f"moved card {card.card_id} from {current!r} to {column!r}", target=card.card_id)

    def label(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        found = self._card(card, "idLabels,idBoard")
        labels = self.http.json("GET", f"/boards/{found['idBoard']}/labels", f"reading the labels of card "
                                f"{card.card_id}'s board", params={"fields": "name"}) or []
        target = next((x for x in labels if same_name(x.get("name"), label)), None)
        if target is None:
            raise UpstreamError(f"the board of card {card.card_id} has no label {label!r}", kind="invalid_request",
                                retryable=False)
        if target["id"] in (found.get("idLabels") or []):
            return Written(done=f"card {card.card_id} already has label {label!r}", acted=False, target=card.card_id)
        self.http.json("POST", f"/cards/{card.card_id}/idLabels", f"labelling card {card.card_id}",
                       data={"value": target["id"]})
        return Written(done=f"labelled card {card.card_id} {label!r}", target=card.card_id)

    def unlabel(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        found = self._card(card, "idLabels,idBoard")
        labels = self.http.json("GET", f"/boards/{found['idBoard']}/labels", f"reading the labels of card "
                                f"{card.card_id}'s board", params={"fields": "name"}) or []
        target = next((x for x in labels if same_name(x.get("name"), label)), None)
        if target is None or target["id"] not in (found.get("idLabels") or []):
            return Written(done=f"card {card.card_id} has no label {label!r}", acted=False, target=card.card_id)
        self.http.json("DELETE", f"/cards/{card.card_id}/idLabels/{target['id']}",
                       f"removing label {label!r} from card {card.card_id}")
        return Written(done=f"removed label {label!r} from card {card.card_id}", target=card.card_id)

