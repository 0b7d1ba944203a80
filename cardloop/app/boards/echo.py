"""Our own writes coming back: the webhook a board sends for cardloop's comment or column move.

Without this a move cardloop made (auto-advance moved the card to "In Review") would come back
as a delivery moving the card to "In Review", and the card workflow would cancel the review it
just started and start it again. A delivery is our echo when:

- its actor is the board's `write_actor` (the user, bot or member cardloop's credential acts as),
  unless it is a failed CI run: cardloop never writes one, and one on its own push is to be fixed;
- it is a comment carrying a cardloop marker line (every comment cardloop writes has one);
- it moves the card into the column cardloop last moved it to, within `echo_window_seconds` of
  that move (the store's record of the board.move write): boards that do not say who moved a
  card (Jira's automation user, a Trello power-up) are recognised by what the delivery says.

The route answers such a delivery 200 "ignored" with the reason, and applies nothing.
"""

from __future__ import annotations

import json
from datetime import UTC

from cardloop.app.boards.events import BoardEvent
from cardloop.contracts.config import Config
from cardloop.integrations.board_clients.base import is_own_comment, same_name
from cardloop.store import Store


def own_echo(config: Config, store: Store, event: BoardEvent, card_key: str, now: float) -> str | None:
    """Why the delivery is cardloop's own write coming back, or None when it is someone else's."""
    if event.kind == "build_failed":
        # cardloop writes comments and moves, never a CI result: a run that failed on a commit
        # cardloop pushed (its sender is cardloop's own account) is exactly one to fix.
        return None
    board = config.board(event.board)
    if board.write_actor and same_name(event.actor, board.write_actor):
        return f"the {event.kind} was made by {event.actor}, cardloop's own {event.board} account"
    if event.kind == "comment" and is_own_comment(event.comment):
        return "cardloop's own comment (it carries a cardloop marker)"
    if event.kind == "transition" and event.to_column:
        last = store.latest_effect(card_key, "board_move")
        if last is not None:
            result, at = last
            column = json.loads(result).get("column", "")
            when = at if at.tzinfo else at.replace(tzinfo=UTC)
            age = now - when.timestamp()
            if same_name(column, event.to_column) and -60 <= age <= board.echo_window_seconds:
                return (f"cardloop moved the card to {column!r} {max(age, 0):.0f} s ago: this delivery is that move "
                        "coming back")
    return None


