"""POST /webhooks/{board}: a board's delivery becomes a card transition or comment (or an edit of
the card, or, for a card archived or deleted on the board, a cancel of its running stage).

Order matters for nothing to be lost: the signature is checked over the raw body before
anything is parsed (401), against each tenant's secret for the board, and the one that matches
is the delivery's tenant (a body naming another tenant: 403). Each event's dedup key is made of
the signed content (boards/replay.py), never of a header; a key the store's deliveries table
already holds is answered "duplicate" and not applied. The event reaches Temporal
(signal-with-start carrying that key, which the card workflow also applies once); only then is
the key recorded and the route answers 2xx. A failure to reach Temporal answers 503 and records
nothing, so the board's own retry delivers it again, safely.

The store is synchronous SQL: every store call here runs in the threadpool, never on the event
loop, so one slow database call cannot stall every other request the API is serving."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from temporalio.service import RPCError

from cardloop.app.api.limits import BodyTooLarge
from cardloop.app.api.logsafe import safe_logger
from cardloop.app.api.services import Services, services
from cardloop.app.api.webhook_ids import merge_duplicate, repository_renamed
from cardloop.app.boards.echo import own_echo, remember_actor, remember_move
from cardloop.app.boards.events import BoardEvent, Ignored, WebhookError
from cardloop.app.boards.identity import resolve_card
from cardloop.app.boards.order import newer_move_applied, remember_move_time
from cardloop.app.boards.payload import field_problems
from cardloop.app.boards.replay import check_window, delivery_key
from cardloop.app.boards.tenancy import board_secrets, claim_matches, verified_tenant
from cardloop.app.cards import CardService
from cardloop.app.temporal import TemporalUnavailable
from cardloop.contracts import metrics
from cardloop.contracts.comments import MAX_COMMENT_CHARS, cut_comment
from cardloop.contracts.errors import ConfigError, InputError, RejectedError
from cardloop.contracts.payloads import MAX_ACTOR, CardRef
from cardloop.prompts.card import MAX_BRANCH, MAX_TITLE, MAX_URL, Card

log = safe_logger(__name__)
router = APIRouter(tags=["webhooks"])
SvcDep = Annotated[Services, Depends(services)]


def card_ref(event: BoardEvent) -> CardRef:
    """The card an event is about: its board id encoded by the one key rule (CardRef.for_board);
    an id that cannot be kept as it is raises ValueError naming it (400), never a merged key."""
    if event.tenant is None:
        raise ValueError("an event reaches a card only once its tenant is verified")
    return CardRef.for_board(event.tenant, event.board, event.card_id)


def new_card(event: BoardEvent, ref: CardRef) -> tuple[Card, list[str]]:
    """The card a board's first delivery about it creates, and what of the board's values it did not
    keep. The move must not be lost for a value over a card's limit (the board will not send it
    again): a longer title is cut (its head still says what the card is about); a longer URL or
    branch is left out, since a cut one names another page or branch, and the card works on a
    branch of its own. Anything else the card refuses is InputError naming the field (400)."""
    dropped: list[str] = []
    url, branch = event.url, event.branch
    if url is not None and len(url) > MAX_URL:
        dropped.append(f"the url ({len(url):,} characters, a card keeps {MAX_URL:,}) was left out")
        url = None
    if branch is not None and len(branch) > MAX_BRANCH:
        dropped.append(f"the branch ({len(branch):,} characters, a card keeps {MAX_BRANCH:,}) was left out: "
                       "the card works on a branch of its own")
        branch = None
    try:
        # The board's own id: import_card derives the same key from it (CardRef.for_board).
        card = Card(id=event.card_id, tenant=ref.tenant, board=ref.board,
                    title=(event.title or event.card_id)[:MAX_TITLE], body=event.body or "", url=url,
                    repo=event.repo, branch=branch)
    except ValidationError as err:
        raise InputError(f"card {event.card_id!r} cannot be created from this delivery: "
                         f"{field_problems(err)}") from None
    return card, dropped


def refreshed_card(card: Card, event: BoardEvent) -> Card | None:
    """The stored card with what the board now says of it (a title renamed, a description
    edited), or None when nothing changed: the stages read the card's fields from the store every
    turn, so the next turn and the next stage work on what the card asks today. Only the values
    the delivery carries change. A card's repository and branch are where its work was pushed:
    they are only filled in when the card had none (a card created without a repository that the
    board later links to one), never switched under work already done, except that the
    repository follows an issue transferred to another one (event.repo_moved): its pull request
    can only be opened there now."""
    update: dict[str, Any] = {}
    if event.title is not None and event.title[:MAX_TITLE] != card.title:
        update["title"] = event.title[:MAX_TITLE]
    if event.body is not None and event.body != card.body:
        update["body"] = event.body
    if event.url is not None and len(event.url) <= MAX_URL and event.url != card.url:
        update["url"] = event.url
    if event.repo is not None and event.repo_moved and event.repo != card.repo:
        update["repo"] = event.repo
    if card.repo is None and event.repo is not None:
        update["repo"] = event.repo
        if card.branch is None and event.branch is not None and len(event.branch) <= MAX_BRANCH:
            update["branch"] = event.branch
    if not update:
        return None
    try:
        return Card.model_validate(card.model_dump() | update)
    except ValidationError as err:
        raise InputError(f"card {event.card_id!r} cannot take this delivery's fields: "
                         f"{field_problems(err)}") from None


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"status": "refused", "detail": message, **extra}, status_code=status)


async def _apply(svc: Services, event: BoardEvent, key: str, moving: set[str],
                 at: float | None = None) -> dict[str, Any]:
    """`key`: the event's dedup key; `moving`: card keys that this delivery also moves to a
    stage (they may be created); `at`: when the event happened, as its signed body says (None
    when it does not): a move older than one the card already took is not applied (boards/order.py)."""
    own = card_ref(event)
    if svc.cards is None:
        raise ConfigError("Temporal is not configured for this API")
    if event.kind == "repository":
        return await repository_renamed(svc, event, key, own)
    # The card the board's id leads to: a card whose board id changed (moved to another team or
    # project) keeps its key, its history and its workflow (boards/identity.py).
    resolved = await run_in_threadpool(resolve_card, svc.store, event, own)
    if resolved.merged is not None:
        # Before the dedup check: a merge that failed half way is done again when redelivered (a
        # merged card's deliveries no longer come here), and one declined is declined again.
        declined = await merge_duplicate(svc, event, key, resolved.merged, resolved.ref)
        if declined is not None:   # the card created under the new id did work of its own: it stays
            log.warning("%s delivery %s: %s", event.board, event.delivery_id, declined)
            first = await run_in_threadpool(svc.store.record_delivery, own.tenant, event.board, key)
            return {"card": resolved.merged.key, "kind": event.kind, "delivery_id": event.delivery_id,
                    "dedup_key": key, "status": "ignored" if first else "duplicate", "reason": declined}
    ref = resolved.ref
    base = {"card": ref.key, "kind": event.kind, "delivery_id": event.delivery_id, "dedup_key": key,
            **({"board_card": event.card_id} if ref != own else {})}
    if resolved.renamed:
        base["renamed"] = resolved.renamed
    if resolved.merged is not None:
        base["merged"] = resolved.merged.key
    if event.kind in ("transition", "build_failed") and event.stage is None:
        reason = (f"column {event.to_column!r} is not mapped to a stage in boards.{event.board}.columns"
                  if event.kind == "transition" else f"boards.{event.board}.failure_stage is off")
        log.info("ignored %s delivery %s: %s", event.board, event.delivery_id, reason)
        if event.kind == "transition":
            # The card left cardloop's column all the same: a move back into it is someone's.
            await run_in_threadpool(remember_move, svc.config, svc.store, event, ref.key)
            if resolved.stored is not None:
                # And the board's newest move put it there: a late delivery of an older move to a
                # mapped column must not take it back and run that stage (boards/order.py).
                when = event.at if event.at is not None else at
                await run_in_threadpool(remember_move_time, svc.store, event, ref.key, when, key)
        return {**base, "status": "ignored", "reason": reason}
    if event.kind == "comment" and not (event.comment or "").strip():
        # A comment with no text (whitespace, an image the board sent no text for) asks nothing:
        # acknowledged, not stored, so the history carries no empty turns.
        return {**base, "status": "ignored", "reason": "the comment has no text"}
    if await run_in_threadpool(svc.store.delivery_seen, ref.tenant, event.board, key):
        log.info("duplicate %s delivery %s (%s) for %s", event.board, event.delivery_id, key, ref.key)
        return {**base, "status": "duplicate"}
    stored = resolved.stored   # read once, by resolve_card
    known = stored is not None
    echo = await run_in_threadpool(own_echo, svc.config, svc.store, event, ref.key, time.time()) if known else None
    if echo is not None:
        log.info("ignored %s delivery %s for %s: %s", event.board, event.delivery_id, ref.key, echo)
        return {**base, "status": "ignored", "reason": echo}
    at = event.at if event.at is not None else at
    older = await run_in_threadpool(newer_move_applied, svc.store, event, ref.key, at) if known else None
    if older is not None:
        log.info("ignored %s delivery %s for %s: %s", event.board, event.delivery_id, ref.key, older)
        # Recorded: a redelivery of it is a duplicate, never applied later by mistake.
        await run_in_threadpool(svc.store.record_delivery, ref.tenant, event.board, key)
        return {**base, "status": "ignored", "reason": older}
    if event.kind in ("build_failed", "edit", "archive") and not known:
        return {**base, "status": "ignored", "reason": f"no card is known for {event.card_id}"}
    if event.kind == "archive":
        return await _archive(svc, event, ref, key, base)
    notes: list[str] = []
    if not known:
        if event.kind == "comment" and own.key not in moving:
            return {**base, "status": "ignored", "reason": f"no card is known for {event.card_id} yet: move it first"}
        card, dropped = new_card(event, ref)
        await run_in_threadpool(svc.cards.import_card, card)
        if event.board_uid is not None or event.board_item is not None:   # what leads its later ids back to it
            await run_in_threadpool(svc.store.remember_board_ids, ref.key, uid=event.board_uid,
                                    item=event.board_item)
        notes += dropped
    elif stored is not None and event.kind != "build_failed":
        # A rename or an edited description on the board reaches the card before the event does.
        changed = refreshed_card(stored, event)
        if changed is not None:
            await run_in_threadpool(svc.store.upsert_card, ref.key, changed)
            if (changed.title, changed.url) != (stored.title, stored.url):
                await _retitle(svc, ref, changed)
        if event.kind == "edit":
            # Nothing to tell Temporal: the running stage's next turn reads the fields from the store.
            first = await run_in_threadpool(svc.store.record_delivery, ref.tenant, event.board, key)
            if changed is None and not resolved.renamed:
                return {**base, "status": "ignored", "reason": "nothing the card keeps changed"}
            return {**base, "status": "accepted" if first else "duplicate", "workflow_id": ref.workflow_id}
    actor = _name(event.actor)
    if event.kind == "comment":
        notes += await _say(svc.cards, ref, event.comment or "", author=actor, delivery_id=key)
        stage = None
    else:
        stage = event.stage
        if event.comment:
            # What the board says about the move (a failed CI run: which one, at which commit, its
            # link) joins the history first: the stage the move starts and the people reading the
            # card see it. Its own delivery id, so a redelivery after a lost answer says it once.
            notes += await _say(svc.cards, ref, event.comment, author=event.board, delivery_id=f"{key}/note")
        await svc.cards.move(ref, stage or "done", delivery_id=key, actor=actor, reason=_reason(event))
        if known:  # a card archived on its board and moved again is back
            await run_in_threadpool(svc.store.set_gone, ref.key, None)
    # Before the delivery's key: a failure here is retried with the delivery (Temporal dedups it).
    await run_in_threadpool(_remember, svc, event, ref.key)
    await run_in_threadpool(remember_move_time, svc.store, event, ref.key, at, key)
    # Recorded only now that Temporal holds the event: a delivery that failed before is retried.
    first = await run_in_threadpool(svc.store.record_delivery, ref.tenant, event.board, key)
    return {**base, "status": "accepted" if first else "duplicate", "stage": stage, "workflow_id": ref.workflow_id,
            **({"note": "; ".join(notes)} if notes else {})}


async def _archive(svc: Services, event: BoardEvent, ref: CardRef, key: str, base: dict[str, Any]) -> dict[str, Any]:
    """The card was archived or deleted on its board: the people working it expect the agent to
    stop. Its running stage is cancelled as `card cancel` does (its history, ledger rows and
    pushed commits stay; the card waits for a move, so one made after it is un-archived runs as
    any move), and the card stays in the store. Answered once the workflow took the cancel: a
    running command may take longer to stop than the board waits."""
    assert svc.cards is not None
    gone = event.gone or "archived"
    actor = _name(event.actor)
    reason = f"cancelled: the card was {gone} on {event.board}" + (f" by {actor}" if actor else "")
    # `card show` and `card list` say so until the card's next move (first: a cancel that fails
    # is redelivered, and marking twice is the same mark).
    await run_in_threadpool(svc.store.set_gone, ref.key, f"{gone} on {event.board}" + (f" by {actor}" if actor else ""))
    try:
        # The delivery's key as the update's id: a redelivery racing this one is the same cancel.
        # The workflow's validator must run on a worker before the update is accepted: more than
        # a signal's rpc_timeout, still within the seconds a board waits (503 past it: redelivered).
        await svc.cards.stop(ref, actor=actor or event.board, reason=f"{reason}; its work is kept",
                             update_id=f"board-{gone}/{key}", timeout=svc.config.temporal.rpc_timeout * 3)
    except RejectedError as err:
        log.info("ignored %s delivery %s for %s: %s", event.board, event.delivery_id, ref.key, err)
        first = await run_in_threadpool(svc.store.record_delivery, ref.tenant, event.board, key)
        if not first:
            return {**base, "status": "duplicate"}
        return {**base, "status": "ignored", "reason": f"{gone}; no stage was running"}
    first = await run_in_threadpool(svc.store.record_delivery, ref.tenant, event.board, key)
    return {**base, "status": "accepted" if first else "duplicate", "reason": reason, "workflow_id": ref.workflow_id}


async def _retitle(svc: Services, ref: CardRef, card: Card) -> None:
    """A renamed card's open run shows the new title in the Temporal UI. The store already holds
    it (every turn reads it there), so a Temporal that does not answer costs the delivery nothing:
    logged, and the run's next start takes the title from the store."""
    assert svc.cards is not None
    try:
        await svc.cards.retitle(ref, card)
    except (RPCError, TemporalUnavailable) as err:
        log.warning("the renamed card %s keeps its old title in Temporal until its next run: %s", ref.key, err)


def _remember(svc: Services, event: BoardEvent, card_key: str) -> None:
    """What the echo check must know of a delivery taken as someone else's (boards/echo.py)."""
    remember_move(svc.config, svc.store, event, card_key)
    remember_actor(svc.config, svc.store, event, card_key)


def _reason(event: BoardEvent) -> str:
    """The move's reason, "board: from -> to". A column's name is the board's (Trello's run to
    16,384 characters): cut, so the reason fits a move rather than the move being refused."""
    def column(name: str | None) -> str:
        return name[:199] + "…" if name and len(name) > 200 else name or "?"
    return f"{event.board}: {column(event.from_column)} -> {column(event.to_column or event.stage)}"


def _name(actor: str | None) -> str | None:
    """Who acted, as a move or comment can carry it: a board's display name longer than that is
    cut rather than the event lost."""
    return actor[:MAX_ACTOR] if actor else None


async def _say(cards: CardService, ref: CardRef, sent: str, *, author: str | None, delivery_id: str) -> list[str]:
    """The comment joins the card's history; what the answer should say about it."""
    text = cut_comment(sent)
    await cards.say(ref, text, author=author, delivery_id=delivery_id)
    if text == sent:
        return []
    # Refusing it would lose it (a board does not send a comment twice): kept, cut, said.
    return [f"the comment was cut to its first and last characters: {len(sent):,} "
            f"is over the history's {MAX_COMMENT_CHARS:,} per comment"]


@router.head("/webhooks/{board}", include_in_schema=False)
async def webhook_handshake(board: str, svc: SvcDep) -> Response:
    """Trello checks the callback URL with HEAD when a webhook is created: answer 200."""
    return Response(status_code=200 if board in svc.adapters else 404)


async def _events(svc: Services, board: str, adapter: Any, request: Request
                  ) -> tuple[list[tuple[BoardEvent, str]], str, float | None] | Ignored:
    """The delivery's events as the verified tenant's, each with its dedup key, and when they
    happened (None when the body does not say); WebhookError."""
    secrets = board_secrets(svc.config, adapter)
    body = await request.body()
    now = svc.clock()
    tenant = verified_tenant(adapter, request.headers, body, secrets, now)
    at = adapter.event_time(request.headers, body)
    check_window(at, now, svc.config.board(board).replay_window_seconds, board)
    parsed = await adapter.parse(request.headers, body)
    if isinstance(parsed, Ignored):
        return parsed
    content = adapter.signed_content(body)
    events = []
    for event in parsed:
        event = claim_matches(event, tenant)
        try:
            card_ref(event)
        except ValueError as err:
            raise WebhookError(400, str(err)) from None
        events.append((event, delivery_key(content, event)))
    return events, tenant, at


@router.post("/webhooks/{board}", summary="Receive a board's webhook delivery",
             responses={200: {"description": "accepted, duplicate or ignored (with the reason)"},
                        400: {"description": "malformed body, or a card id that cannot be kept as it is"},
                        401: {"description": "missing or wrong signature, or a replay outside the time window"},
                        403: {"description": "the body names a tenant other than the one whose secret signed it"},
                        404: {"description": "unknown board"}, 413: {"description": "body too large"},
                        503: {"description": "board not configured, or Temporal unavailable: redeliver"}})
async def webhook(board: str, request: Request, svc: SvcDep) -> Response:
    label = board if board in svc.adapters else "unknown"
    try:
        answer = await _deliver(board, request, svc)
    except BodyTooLarge:  # the body limit answers 413 and counts it (too_large_answer)
        raise
    except Exception:  # answered 500 by the app's handler
        metrics.WEBHOOK_DELIVERIES.labels(label, "error").inc()
        raise
    _count(label, answer)
    return answer


def too_large_answer(path: str, max_bytes: int, known: Iterable[str]) -> Response | None:
    """A webhook body refused by the body limit (limits.BodySizeLimit, declared or streamed past
    api.max_body_bytes): bad input, counted `invalid`, answered in the route's own shape. None for
    any other path."""
    board = path.removeprefix("/webhooks/")
    if board == path or "/" in board:
        return None
    metrics.WEBHOOK_DELIVERIES.labels(board if board in known else "unknown", "invalid").inc()
    return JSONResponse({"status": "refused", "detail": f"request body larger than {max_bytes:,} bytes "
                         "(api.max_body_bytes)"}, status_code=413)


def _count(board: str, answer: Response) -> None:
    """cardloop_webhook_deliveries_total{board, result}: an unknown board is "unknown" (the path is
    the sender's text: its label values must stay a bounded set)."""
    status = answer.status_code
    if status == 200:
        body = json.loads(bytes(answer.body))
        found = {e.get("status") for e in body.get("events", [])}
        result = "accepted" if "accepted" in found else "duplicate" if "duplicate" in found else "ignored"
    else:
        result = {400: "invalid", 413: "invalid", 503: "unavailable"}.get(status, "refused")
    metrics.WEBHOOK_DELIVERIES.labels(board, result).inc()


async def _deliver(board: str, request: Request, svc: Services) -> Response:
    adapter = svc.adapters.get(board)
    if adapter is None:
        return _error(404, f"unknown board {board!r}; boards: {', '.join(sorted(svc.adapters))}")
    try:
        found = await _events(svc, board, adapter, request)
    except WebhookError as err:
        log.warning("%s webhook refused (%s): %s", board, err.status, err.message)
        return _error(err.status, err.message)
    if isinstance(found, Ignored):
        return JSONResponse({"status": "ignored", "reason": found.reason})
    events, tenant, at = found
    moving = {card_ref(e).key for e, _ in events if e.kind == "transition" and e.stage is not None}
    results = []
    try:
        for event, key in events:
            results.append(await _apply(svc, event, key, moving, at))
    except (RPCError, RuntimeError, ConfigError) as err:
        log.error("%s webhook not applied, Temporal unavailable: %s", board, err)
        return _error(503, "the event could not be handed to Temporal; redeliver later", applied=results)
    except ValidationError as err:  # a value the board sent that a card or a signal cannot carry
        return _error(400, f"the delivery cannot be applied: {field_problems(err)}", applied=results)
    except (InputError, ValueError) as err:
        return _error(400, str(err), applied=results)
    return JSONResponse({"status": "ok", "tenant": tenant, "events": results})
