"""POST /webhooks/{board}: a board's delivery becomes a card transition or comment.

Order matters for nothing to be lost: the signature is checked over the raw body before
anything is parsed (401); the event reaches Temporal (signal-with-start carrying the delivery
id, which the card workflow applies once); only then does the route answer 2xx. A failure
to reach Temporal answers 503, so the board's own retry delivers it again, safely.

The store is synchronous SQL: every store call here runs in the threadpool, never on the event
loop, so one slow database call cannot stall every other request the API is serving."""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from temporalio.service import RPCError

from cardloop.app.api.services import Services, services
from cardloop.app.boards.events import BoardEvent, Ignored, WebhookError
from cardloop.contracts.errors import ConfigError, InputError
from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import Card

log = logging.getLogger(__name__)
router = APIRouter(tags=["webhooks"])
SvcDep = Annotated[Services, Depends(services)]
_UNSAFE = re.compile(r"[^A-Za-z0-9._:#-]")


def card_ref(event: BoardEvent) -> CardRef:
    """Board ids like "acme/api#12" become key-safe ("acme:api#12"): the card key uses "/"."""
    card_id = _UNSAFE.sub(":", event.card_id).lstrip("._:#-")[:200] or "card"
    return CardRef(tenant=event.tenant, board=event.board, card_id=card_id)


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"status": "refused", "detail": message, **extra}, status_code=status)


async def _apply(svc: Services, event: BoardEvent, moving: set[str]) -> dict[str, Any]:
    """`moving`: card keys that this delivery also moves to a stage (they may be created)."""
    ref = card_ref(event)
    base = {"card": ref.key, "kind": event.kind, "delivery_id": event.delivery_id}
    if svc.cards is None:
        raise ConfigError("Temporal is not configured for this API")
    known = (await run_in_threadpool(svc.store.card_fields, ref.key)) is not None
    if event.kind in ("transition", "build_failed") and event.stage is None:
        reason = (f"column {event.to_column!r} is not mapped to a stage in boards.{event.board}.columns"
                  if event.kind == "transition" else f"boards.{event.board}.failure_stage is off")
        log.info("ignored %s delivery %s: %s", event.board, event.delivery_id, reason)
        return {**base, "status": "ignored", "reason": reason}
    if event.kind == "build_failed" and not known:
        return {**base, "status": "ignored", "reason": f"no card is known for {event.card_id}"}
    if not known:
        if event.kind == "comment" and ref.key not in moving:
            return {**base, "status": "ignored", "reason": f"no card is known for {event.card_id} yet: move it first"}
        card = Card(id=ref.card_id, tenant=ref.tenant, board=ref.board, title=(event.title or event.card_id)[:1000],
                    body=event.body or "", url=event.url, repo=event.repo, branch=event.branch)
        await run_in_threadpool(svc.cards.import_card, card)
    if event.kind == "comment":
        await svc.cards.say(ref, event.comment or "", author=event.actor, delivery_id=event.delivery_id)
        stage = None
    else:
        stage = event.stage
        await svc.cards.move(ref, stage or "done", delivery_id=event.delivery_id, actor=event.actor,
                             reason=f"{event.board}: {event.from_column or '?'} -> {event.to_column or stage}")
    first = await run_in_threadpool(svc.store.record_delivery, ref.tenant, event.board, event.delivery_id)
    return {**base, "status": "accepted" if first else "duplicate", "stage": stage, "workflow_id": ref.workflow_id}


@router.head("/webhooks/{board}", include_in_schema=False)
async def webhook_handshake(board: str, svc: SvcDep) -> Response:
    """Trello checks the callback URL with HEAD when a webhook is created: answer 200."""
    return Response(status_code=200 if board in svc.adapters else 404)


@router.post("/webhooks/{board}", summary="Receive a board's webhook delivery",
             responses={200: {"description": "accepted, duplicate or ignored (with the reason)"},
                        400: {"description": "malformed body"}, 401: {"description": "missing or wrong signature"},
                        404: {"description": "unknown board"}, 413: {"description": "body too large"},
                        503: {"description": "board not configured, or Temporal unavailable: redeliver"}})
async def webhook(board: str, request: Request, svc: SvcDep) -> Response:
    adapter = svc.adapters.get(board)
    if adapter is None:
        return _error(404, f"unknown board {board!r}; boards: {', '.join(sorted(svc.adapters))}")
    secret = svc.config.secret(adapter.secret_env)
    if secret is None:
        return _error(503, f"webhooks from {board} are refused: {adapter.secret_env} is not set")
    body = await request.body()
    try:
        adapter.verify(request.headers, body, secret.reveal(), svc.clock())
        parsed = await adapter.parse(request.headers, body)
    except WebhookError as err:
        log.warning("%s webhook refused (%s): %s", board, err.status, err.message)
        return _error(err.status, err.message)
    if isinstance(parsed, Ignored):
        return JSONResponse({"status": "ignored", "reason": parsed.reason})
    results = []
    moving = {card_ref(e).key for e in parsed if e.kind == "transition" and e.stage is not None}
    try:
        for event in parsed:
            results.append(await _apply(svc, event, moving))
    except (RPCError, RuntimeError, ConfigError) as err:
        log.error("%s webhook not applied, Temporal unavailable: %s", board, err)
        return _error(503, "the event could not be handed to Temporal; redeliver later", applied=results)
    except (InputError, ValueError) as err:
        return _error(400, str(err), applied=results)
    return JSONResponse({"status": "ok", "events": results})
