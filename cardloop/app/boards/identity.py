"""Which card a board's event is about when the board changed the card's human id.

A card is keyed by the id its board shows people (Linear's ENG-123, Jira's PROJ-1): moved to
another team or project, the issue is OPS-45 or OTHER-7 from then on, and the next delivery names
a card cardloop never saw. Started as a new card it would run with an empty history while the
old card's history, notes, costs and running stage were orphaned. So each card also records its
board's stable id (BoardEvent.board_uid: Linear's issue UUID, Jira's numeric issue id, Trello's
long card id, GitHub's issue node id) and the names the board gave it since (store/aliases.py),
and an event naming an id the store does not hold is led to the card that id belongs to:

    1. a name recorded for a card of this tenant and board (a later delivery after a move). This
       wins over a card stored under the event's own key when the name was recorded for another
       card: the board gave that id to it since (a repository renamed onto a freed name,
       store.rename_repository; a duplicate merged into the card it is, below)
    2. else a card stored under the event's own key is that card (its stable id recorded the
       first time). When the delivery also says the card had another id before (`was`) and that
       id leads to another stored card, this one was created for that card under its new id
       before the delivery saying so arrived (GitHub sends a project move naming a transferred
       issue before, or without waiting for, the `transferred` delivery): it is merged into the
       older card (`Resolved.merged`; the route cancels its run, carries what people said on it
       and its newest move over and records the merge, store.merge_card; app/api/webhook_ids.py),
       and the older card goes on. One that already finished a stage run is not merged (its work
       is its own): the route says so and both stay as they are
    3. else the card the event's stable id was recorded for (the first delivery after a move),
       else the card the event's board item was recorded for (a GitHub project item, which keeps
       its id when its issue is transferred and gets a new node id: BoardEvent.board_item)
    4. else a card under an id the delivery says the card had before (BoardEvent.was: Linear's
       previousIdentifiers, Jira's `Key` changelog item, a GitHub issue transfer's old issue,
       whose node id GitHub does not keep), for cards stored before stable ids were and for
       moves that change the stable id too
    5. else nobody: the event's own key, as before (a new card, or "no card is known")

The card keeps its first key: its store rows, ledger, notes and its Temporal workflow
(`card/<key>`, whose committed histories replay unchanged) stay where they are; the new name
is recorded beside it. A card named back to an id it had before (its first, or an older later
one) has that id recorded as its newest name again, so its board writes go there (a CI run's
delivery excepted: it names the repository as it was when the run started). Every lookup is
within the event's verified tenant and its board.
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
    merged: CardRef | None = None   # a card created for this one under its new id, merged into it now


def resolve_card(store: Store, event: BoardEvent, own: CardRef) -> Resolved:
    """The card `event` (whose own key is `own`) is about; records what it learnt on the way."""
    uid, item = event.board_uid, event.board_item
    stored, match = store.card_and_ids(own.key, uid=uid, item=item)
    # What this delivery teaches about the card it reaches: its stable id and its board item,
    # each only when recorded for no card yet (the first card keeps them).
    learnt = {"uid": uid if match.by_uid is None else None, "item": item if match.by_item is None else None}
    if match.by_name not in (None, own.key) or (stored is None and match.by_name is not None):
        # A name recorded for a card: a later delivery after a move, or the id was given to
        # another card than the one stored under it (a repository renamed onto a freed name, a
        # duplicate merged into the card it is): the recorded name wins.
        key = match.by_name
        assert key is not None
        # An older name of the card given to it again (OPS-7 -> OPS-8 -> OPS-7) is its newest now.
        named_back = own.card_id if match.newest != own.card_id and _names_it_now(event) else None
        _remember(store, key, name=named_back, **learnt)
        return Resolved(CardRef.parse(key), store.card_fields(key))
    if stored is not None:
        if event.was and match.by_uid in (None, own.key):
            # Told of a move only now, a card created under the new id meanwhile (GitHub: a
            # project move naming the transferred issue before the `transferred` delivery).
            older = _by_former_id(store, event, own)
            if older is not None and older != own.key:
                return _merged(event, own, older, store)
        # Named back to the id its key was made of after a later name: that id is the board's again.
        named_back = own.card_id if match.newest not in (None, own.card_id) and _names_it_now(event) else None
        _remember(store, own.key, name=named_back, **learnt)
        if match.by_uid not in (None, own.key):
            # The board gives this name to another issue than the card's: the name the people see
            # wins (it is what they moved), and the stable id stays with the card it was recorded for.
            log.warning("%s id %s of %s was recorded for %s", event.board, uid, own.key, match.by_uid)
        return Resolved(own, stored)
    key = match.by_uid or match.by_item or _by_former_id(store, event, own)
    if key is None:
        return Resolved(own)   # a card the route creates records the delivery's ids itself
    store.remember_board_ids(key, name=own.card_id, **learnt)
    log.info("%s card %s is %s, renamed on the board", event.board, event.card_id, key)
    return Resolved(CardRef.parse(key), store.card_fields(key),
                    f"{event.card_id} is the card {key} under a new id on {event.board}: its history and its "
                    "workflow go on")


def _remember(store: Store, key: str, *, name: str | None, uid: str | None, item: str | None) -> None:
    """Record what the delivery taught about the card `key`, in one write, or nothing."""
    if name is not None or uid is not None or item is not None:
        store.remember_board_ids(key, uid=uid, name=name, item=item)


def _names_it_now(event: BoardEvent) -> bool:
    """Whether the delivery names the card as the board shows it now. A CI run names the
    repository as it was when the run started (a run queued before a rename arrives after it):
    it reaches the card by an older name but does not make that name the board's again."""
    return event.kind != "build_failed"


def _merged(event: BoardEvent, own: CardRef, older: str, store: Store) -> Resolved:
    """`own` was created for the card `older` under its new id before the delivery saying so:
    to be merged into `older`, which goes on (the route stops `own`'s run, then records the merge:
    store.merge_card, so a delivery that fails on the way is redelivered and merges again)."""
    log.info("%s card %s merged into %s, renamed on the board", event.board, own.key, older)
    return Resolved(CardRef.parse(older), store.card_fields(older),
                    f"{event.card_id} is the card {older} under a new id on {event.board}: its history and its "
                    f"workflow go on; {own.key}, created for it meanwhile, was merged into it", merged=own)


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
