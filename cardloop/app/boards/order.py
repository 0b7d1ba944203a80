"""Board moves that arrive out of order: a late delivery of an older move is not applied.

A board's webhook for a move can arrive after the webhook of a later move: the route answered it
503 while Temporal was unreachable and the board retried it minutes later (Jira retries by itself,
GitHub on a click), or the board sent two moves in parallel. Applied in arrival order, the older
move would put the card back in a column the board no longer shows, and run that stage.

The route records the event time of every board move it applied (an effect of the card, one per
delivery) and answers a move whose event time is older than the newest applied one "ignored",
with both times. Only boards whose body carries the event's time take part (GitHub's item
`updated_at`, Jira's `timestamp`, Trello's `action.date`, Linear's `data.updatedAt`, a generic
`timestamp`); moves with the same time are both applied, in arrival order, and a move without a
time is never held back.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from cardloop.app.boards.events import BoardEvent
from cardloop.store import Store

MOVE_AT = "board_move_at"


def newer_move_applied(store: Store, event: BoardEvent, card_key: str, at: float | None) -> str | None:
    """Why this move is older than one the card already took from its board, or None."""
    if event.kind != "transition" or at is None:
        return None
    applied = [json.loads(result) for result in store.effect_results(card_key, MOVE_AT)]
    if not applied:
        return None
    newest = max(applied, key=lambda seen: float(seen["at"]))
    newest_at = float(newest["at"])
    if at >= newest_at:
        return None
    return (f"an older move (to {event.to_column!r} at {_iso(at)}) than the one the card already took "
            f"(to {newest['column']!r} at {_iso(newest_at)}): the card stays where the newest move put it")


def remember_move_time(store: Store, event: BoardEvent, card_key: str, at: float | None, key: str) -> None:
    """The applied move's event time, under its dedup key (a redelivery records nothing new)."""
    if event.kind == "transition" and at is not None:
        store.record_effect(card_key, f"{MOVE_AT}/{key}", MOVE_AT, json.dumps({"at": at, "column": event.to_column}))


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
