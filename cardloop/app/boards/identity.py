"""Which card a board's event is about when the board changed the card's human id.

A card is keyed by the id its board shows people (Linear's ENG-123, Jira's PROJ-1): moved to
another team or project, the issue is OPS-45 or OTHER-7 from then on, and the next delivery names
a card cardloop never saw. Started as a new card it would run with an empty history while the
old card's history, notes, costs and running stage were orphaned. So each card also records its
board's stable id (BoardEvent.board_uid: Linear's issue UUID, Jira's numeric issue id, Trello's
long card id, GitHub's issue node id) and the names the board gave it since (store/aliases.py),
and an event naming an id the store does not hold is led to the card that id belongs to:

    1. a card stored under the event's own key is that card (its stable id recorded the first time)
    2. else a name recorded for a card of this tenant and board (a later delivery after a move)
    3. else the card the event's stable id was recorded for (the first delivery after a move)
    4. else a card under an id the delivery says the card had before (BoardEvent.was: Linear's
       previousIdentifiers, Jira's `Key` changelog item, a GitHub issue transfer's old issue,
       whose node id GitHub does not keep), for cards stored before stable ids were and for
       moves that change the stable id too
    5. else nobody: the event's own key, as before (a new card, or "no card is known")

The card keeps its first key: its store rows, ledger, notes and its Temporal workflow
(`card/<key>`, whose committed histories replay unchanged) stay where they are; the new name
is recorded beside it. Every lookup is within the event's verified tenant and its board.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from cardloop.app.boards.events import BoardEvent
from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import Card
from cardloop.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resolved:
    """The card an event is about (`ref`), its stored fields (None: not stored, read once here
    for the route), and, when this delivery taught cardloop a new name for it, what the answer
    says about that."""

    ref: CardRef
    stored: Card | None = None
    renamed: str | None = None


def resolve_card(store: Store, event: BoardEvent, own: CardRef) -> Resolved:
    """The card `event` (whose own key is `own`) is about; records what it learnt on the way."""
    uid = event.board_uid
    stored, match = store.card_and_ids(own.key, uid=uid)
    if stored is not None:
        if uid is not None and match.by_uid is None:
            store.remember_board_ids(own.key, uid=uid)
        elif match.by_uid not in (None, own.key):
            # The board gives this name to another issue than the card's: the name the people see
            # wins (it is what they moved), and the stable id stays with the card it was recorded for.
            log.warning("%s id %s of %s was recorded for %s", event.board, uid, own.key, match.by_uid)
        return Resolved(own, stored)
    if match.by_name is not None:
        if uid is not None and match.by_uid is None:
            store.remember_board_ids(match.by_name, uid=uid)
        return Resolved(CardRef.parse(match.by_name), store.card_fields(match.by_name))
    key = match.by_uid or _by_former_id(store, event, own)
    if key is None:
        return Resolved(own)
    store.remember_board_ids(key, uid=uid, name=own.card_id)
    log.info("%s card %s is %s, renamed on the board", event.board, event.card_id, key)
    return Resolved(CardRef.parse(key), store.card_fields(key),
                    f"{event.card_id} is the card {key} under a new id on {event.board}: its history and its "
                    "workflow go on")


def _by_former_id(store: Store, event: BoardEvent, own: CardRef) -> str | None:
    """The stored card under an id the delivery says the card had, directly or as a recorded name."""
    for former in event.was:
        try:
            ref = CardRef.for_board(own.tenant, own.board, former)
        except ValueError:
            continue
        if ref.key == own.key:
            continue
        if store.card_fields(ref.key) is not None:
            return ref.key
        named = store.card_for_board_ids(own.tenant, own.board, name=ref.card_id).by_name
        if named is not None:
            return named
    return None
