"""Our own writes coming back: the webhook a board sends for cardloop's comment or column move.

Without this a move cardloop made (auto-advance moved the card to "In Review") would come back
as a delivery moving the card to "In Review", and the card workflow would cancel the review it
just started and start it again. A delivery is our echo when:

- its actor is the board's `write_actor` (the user, bot or member cardloop's credential acts as),
  unless it is a failed CI run: cardloop never writes one, and one on its own push is to be fixed;
- it is a comment carrying a cardloop marker line (every comment cardloop writes has one) outside
  any quote: a person's reply quoting our comment, marker and all, is theirs;
- it moves the card into the column cardloop last moved it to, within `echo_window_seconds` of
  that move (the store's record of the board.move write): boards that do not say who moved a
  card (Jira's automation user, a Trello power-up) are recognised by what the delivery says.
  But not when the card has moved elsewhere since (a person took it out of that column: the
  move back is theirs), nor when the board names an actor cardloop has already taken a move or
  comment of on this card while `write_actor` says who cardloop is (a person, not cardloop).

The route answers such a delivery 200 "ignored" with the reason, and applies nothing. What the
last two rules need, the route records with `remember_move` and `remember_actor` once it took a
delivery as someone else's: effects of the card in the store, keyed so that a lookup is exact
(no clock comparison, which SQLite's one-second timestamps would make a coin toss).
"""

from __future__ import annotations

import hashlib
import json

from cardloop.app.boards.events import BoardEvent
from cardloop.contracts.config import BoardConfig, Config
from cardloop.integrations.board_clients.base import is_own_comment, same_name
from cardloop.store import Store
from cardloop.store.values import LatestEffect

# Effect kinds of the card, recorded by the route: someone moved the card out of the column of
# cardloop's move (one per such move), and someone other than cardloop acted on the card.
MOVED_ON = "board_moved_on"
ACTOR = "board_actor"


def own_echo(config: Config, store: Store, event: BoardEvent, card_key: str, now: float) -> str | None:
    """Why the delivery is cardloop's own write coming back, or None when it is someone else's."""
    if event.kind == "build_failed":
        # cardloop writes comments and moves, never a CI result: a run that failed on a commit
        # cardloop pushed (its sender is cardloop's own account) is exactly one to fix.
        return None
    board = config.board(event.board)
    if _is_cardloop(board, event.actor):
        return f"the {event.kind} was made by {event.actor}, cardloop's own {event.board} account"
    if event.kind == "comment" and is_own_comment(event.comment):
        return "cardloop's own comment (it carries a cardloop marker)"
    if event.kind == "transition" and event.to_column:
        return _our_move_back(board, store, event, card_key, now)
    return None


def _our_move_back(board: BoardConfig, store: Store, event: BoardEvent, card_key: str, now: float) -> str | None:
    last = store.latest_effect(card_key, "board_move")
    if last is None or not same_name(_column(last), event.to_column):
        return None
    age = now - last.at.timestamp()
    if not -60 <= age <= board.echo_window_seconds:
        return None
    if store.effect(card_key, _moved_on_key(last)) is not None:
        return None   # someone took the card out of that column since: this move back is theirs
    if board.write_actor and event.actor and store.effect(card_key, _actor_key(event.actor)) is not None:
        return None   # the board names someone whose move or comment this card already took
    return (f"cardloop moved the card to {_column(last)!r} {max(age, 0):.0f} s ago: this delivery is that move "
            "coming back")


def remember_move(config: Config, store: Store, event: BoardEvent, card_key: str) -> None:
    """The board moved the card (a delivery taken as someone else's, applied or to a column no
    stage maps): when that is away from the column cardloop last moved it to, a later move back
    into that column is no echo of cardloop's move."""
    if event.kind != "transition" or not event.to_column or _is_cardloop(config.board(event.board), event.actor):
        return
    last = store.latest_effect(card_key, "board_move")
    if last is not None and not same_name(_column(last), event.to_column):
        store.record_effect(card_key, _moved_on_key(last), MOVED_ON,
                            json.dumps({"column": event.to_column, "actor": event.actor}))


def remember_actor(config: Config, store: Store, event: BoardEvent, card_key: str) -> None:
    """The card took a move or comment by `event.actor` as theirs. Only while `write_actor` says
    who cardloop is: else cardloop's own account could be remembered as someone else."""
    board = config.board(event.board)
    if event.kind == "build_failed" or not event.actor or not board.write_actor or _is_cardloop(board, event.actor):
        return
    store.record_effect(card_key, _actor_key(event.actor), ACTOR, event.actor)


def _is_cardloop(board: BoardConfig, actor: str | None) -> bool:
    return bool(board.write_actor) and same_name(actor, board.write_actor)


def _column(move: LatestEffect) -> str:
    return str(json.loads(move.result).get("column", ""))


def _moved_on_key(move: LatestEffect) -> str:
    return f"{MOVED_ON}/{hashlib.sha256(move.key.encode()).hexdigest()}"


def _actor_key(actor: str) -> str:
    # Names match as same_name compares them: case- and space-insensitively.
    name = " ".join(actor.split()).casefold()
    return f"{ACTOR}/{hashlib.sha256(name.encode()).hexdigest()}"
