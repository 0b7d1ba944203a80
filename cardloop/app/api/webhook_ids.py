"""What a board's changes of a card's identity ask of the webhook route beyond finding the card
(boards/identity.py finds it): a GitHub repository renamed or moved to another owner renames the
cards in it (repository_renamed), and a card created under a new id before the delivery linking it
to its card is merged into that card (merge_duplicate)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from starlette.concurrency import run_in_threadpool

from cardloop.app.api.logsafe import safe_logger
from cardloop.app.api.services import Services
from cardloop.app.boards.events import BoardEvent
from cardloop.app.boards.order import MOVE_AT
from cardloop.app.cards import NoWorkerAnswered
from cardloop.contracts.errors import RejectedError
from cardloop.contracts.payloads import CardRef
from cardloop.store import Store

log = safe_logger(__name__)


async def repository_renamed(svc: Services, event: BoardEvent, key: str, own: CardRef) -> dict[str, Any]:
    """A repository renamed or moved to another owner (GitHub's `repository` renamed or
    transferred: `was` the old "owner/name", `repo` the new): the cards of the delivery's tenant
    (never another's: the store's rename is scoped to it) that the board names under the old
    name are named under the new one, and cards working in it work in the new one. Nothing
    reaches Temporal: every stage turn and board write reads the store."""
    base = {"kind": event.kind, "delivery_id": event.delivery_id, "dedup_key": key, "repository": event.repo,
            "was": event.was[0]}
    if await run_in_threadpool(svc.store.delivery_seen, own.tenant, event.board, key):
        return {**base, "status": "duplicate"}
    assert event.repo is not None
    cards = await run_in_threadpool(svc.store.rename_repository, own.tenant, event.board, event.was[0], event.repo)
    first = await run_in_threadpool(svc.store.record_delivery, own.tenant, event.board, key)
    if not cards:
        return {**base, "status": "ignored", "reason": f"no card of tenant {own.tenant} is in {event.was[0]}"}
    log.info("%s repository %s is %s now: %d card(s) follow", event.board, event.was[0], event.repo, len(cards))
    return {**base, "status": "accepted" if first else "duplicate", "cards": cards}


async def merge_duplicate(svc: Services, event: BoardEvent, key: str, duplicate: CardRef,
                          into: CardRef) -> str | None:
    """`duplicate` was created for the card `into` under its new id before the delivery linking
    the two arrived (boards/identity.py): its running stage is cancelled (its history and ledger
    rows stay under its key), what people said on it joins `into`'s history, the newest board
    move it took goes to `into` when `into` took none as new (a move to the stage `into` runs
    leaves that run going: nothing runs twice), and only then is it merged, so a failure on the
    way is redelivered and done again, each step once (each carries an id of this delivery).

    None once merged; why not, when `duplicate` already finished a stage run (its work, a pull
    request perhaps, is its own: merging would cut it off from the card people follow). It then
    stays a card of its own, nothing of either card changes, and the answer says so."""
    assert svc.cards is not None
    try:
        state = await svc.cards.state(duplicate, timeout=svc.config.temporal.rpc_timeout * 3)
    except NoWorkerAnswered as err:   # the route answers 503: the board redelivers, the merge is tried again
        raise RuntimeError(f"{duplicate.key} cannot be merged into {into.key} yet: {err}") from None
    if state is not None and state.history:
        runs = ", ".join(f"{r.stage} (run {r.run}) {r.outcome}" for r in state.history[-3:])
        return (f"{duplicate.key}, created for {event.card_id} before this delivery said it is the card "
                f"{into.key}, has finished stage runs of its own ({runs}): it is not merged and stays a card "
                f"of its own; {into.key} keeps its name on {event.board}")
    reason = f"merged into {into.key}: the same {event.board} card under its new id {event.card_id}"
    with contextlib.suppress(RejectedError):   # raised when no stage ran on it: nothing to stop
        await svc.cards.stop(duplicate, actor=event.board, reason=reason, update_id=f"merged/{key}",
                             timeout=svc.config.temporal.rpc_timeout * 3)
    # What people (and the board) said on it joins the card's history, each once whatever the
    # redeliveries (the id is the message's own); the agent's turns on it stay under its key.
    for message in await run_in_threadpool(svc.store.messages, duplicate.key):
        if message.role == "user" and message.author is not None and message.content.strip():
            said = hashlib.sha256(f"{message.author}\0{message.content}".encode()).hexdigest()[:24]
            await svc.cards.say(into, message.content, author=message.author,
                                delivery_id=f"merged/{duplicate.key}/{said}")
    moves = await run_in_threadpool(_newest_moves, svc.store, duplicate.key, into.key)
    if moves[0] is not None and (moves[1] is None or float(moves[0]["at"]) > float(moves[1]["at"])):
        stage = svc.config.board(event.board).stage_for(moves[0]["column"])
        if stage is not None:
            await svc.cards.move(into, stage, delivery_id=f"{key}/merged", actor=event.board,
                                 reason=f"{event.board}: the move {duplicate.key} took -> {moves[0]['column']}")
            await run_in_threadpool(svc.store.record_effect, into.key, f"{MOVE_AT}/{key}/merged", MOVE_AT,
                                    json.dumps(moves[0]))
    await run_in_threadpool(svc.store.merge_card, duplicate.key, into.key,
                            f"merged into {into.key} (the same card under a new id on {event.board})")
    return None


def _newest_moves(store: Store, *keys: str) -> list[dict[str, Any] | None]:
    """The newest board move (event time, column) each card took, or None."""
    found: list[dict[str, Any] | None] = []
    for card_key in keys:
        applied = [json.loads(result) for result in store.effect_results(card_key, MOVE_AT)]
        found.append(max(applied, key=lambda seen: float(seen["at"])) if applied else None)
    return found
