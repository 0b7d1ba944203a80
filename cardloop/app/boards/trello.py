"""Trello: cards moved between lists and new comments.

    action.type   result
    updateCard    transition when action.data has listBefore and listAfter (a move between lists),
                  else archive when action.data.old.closed is false and action.data.card.closed
                  true (the card was archived), else edit when action.data.old has name or desc
                  (renamed, description edited)
    deleteCard    archive (the card was deleted)
    commentCard   comment on the card
    others        Ignored

card_id is the card's shortLink (the id in https://trello.com/c/<shortLink>), else its id; the
tenant key is the board id (action.data.board.id, else the webhook's model.id). Every event also
carries the card's long id (action.data.card.id) as its stable id: a deleteCard that names the
card by that id alone (no shortLink, as Trello sent in 2015) reaches the card cardloop keeps under
its shortLink (boards/identity.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.app.boards.events import BoardEvent, Ignored
from cardloop.app.boards.payload import (
    event,
    load_object,
    lookup,
    opt_obj,
    opt_str,
    req_obj,
    req_str,
    short,
    stable_id,
)
from cardloop.app.boards.replay import iso_time, json_object
from cardloop.app.boards.signatures import verify_trello
from cardloop.contracts.config import BoardConfig


class TrelloAdapter:
    name = "trello"
    secret_env = "CARDLOOP_TRELLO_SECRET"

    def __init__(self, board: BoardConfig) -> None:
        self.board = board

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None:
        verify_trello(headers, body, secret, self.board.callback_url)

    def signed_content(self, body: bytes) -> bytes:
        return body + self.board.callback_url.encode("utf-8")

    def event_time(self, headers: Mapping[str, str], body: bytes) -> float | None:
        return iso_time(json_object(body), "action.date")

    async def parse(self, headers: Mapping[str, str], body: bytes) -> list[BoardEvent] | Ignored:
        data = load_object(body)
        action_type = opt_str(data, "action.type")
        if action_type == "updateCard":
            return self._update_card(data)
        if action_type == "commentCard":
            return self._comment(data)
        if action_type == "deleteCard":
            return [event(kind="archive", **self._common(data), gone="deleted")]
        return Ignored(reason=f"Trello action {short(action_type)}: cardloop acts on list moves, comments, "
                              "archived and deleted cards")

    def _common(self, data: dict[str, Any]) -> dict[str, Any]:
        req_obj(data, "action.data.card")
        short_link = opt_str(data, "action.data.card.shortLink")
        return {
            "board": self.name,
            "tenant": self.board.named_tenant(opt_str(data, "action.data.board.id") or opt_str(data, "model.id")),
            "card_id": short_link or req_str(data, "action.data.card.id"),
            "board_uid": stable_id(data, "action.data.card.id"),
            # Trello retries with the same action, so its id identifies the delivery.
            "delivery_id": req_str(data, "action.id"),
            "title": opt_str(data, "action.data.card.name"),
            "url": f"https://trello.com/c/{short_link}" if short_link else None,
            "actor": opt_str(data, "action.memberCreator.fullName") or opt_str(data, "action.memberCreator.username"),
        }

    def _update_card(self, data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        before, after = opt_obj(data, "action.data.listBefore"), opt_obj(data, "action.data.listAfter")
        if before is None or after is None:
            old = opt_obj(data, "action.data.old") or {}
            # Archiving is an updateCard that flips `closed` (old.closed false, card.closed true);
            # un-archiving flips it back and asks nothing: the card's next move starts it again.
            if old.get("closed") is False and lookup(data, "action.data.card.closed") is True:
                return [event(kind="archive", **self._common(data), gone="archived")]
            if "name" in old or "desc" in old:
                return [event(kind="edit", **self._common(data), body=opt_str(data, "action.data.card.desc"))]
            return Ignored(reason="Trello card update was not a move between lists, an archive, a rename or a "
                                  "description edit")
        to_column = req_str(data, "action.data.listAfter.name")
        return [event(
            kind="transition", **self._common(data), from_column=opt_str(data, "action.data.listBefore.name"),
            to_column=to_column, stage=self.board.stage_for(to_column),
            body=opt_str(data, "action.data.card.desc"),
        )]

    def _comment(self, data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        text = opt_str(data, "action.data.text")
        if not text or not text.strip():
            return Ignored(reason="empty comment")
        return [event(kind="comment", **self._common(data), comment=text)]
