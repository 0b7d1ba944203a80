"""A tenant's cards: GET /cards/{card}/prompt, the prompt core's explain for one of them;
POST /cards/{card}/retry, its failed stage run again (as `cardloop card retry` does);
POST /cards/{card}/cancel, its running stage stopped with its work kept (`cardloop card cancel`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from temporalio.service import RPCError

from cardloop.app.api.auth import require_tenant
from cardloop.app.api.services import Services, services
from cardloop.contracts.errors import ConfigError, RejectedError
from cardloop.contracts.payloads import CardRef
from cardloop.prompts.assemble import AssemblyError, AssemblyRequest
from cardloop.prompts.stages import STAGE_NAMES, parse_stage

router = APIRouter(tags=["cards"])


@router.get("/cards/{card:path}/prompt", summary="Explain the prompt a card's stage gets")
def card_prompt(
    card: str,
    tenant: Annotated[str, Depends(require_tenant)],
    svc: Annotated[Services, Depends(services)],
    stage: Annotated[str, Query(description=" | ".join(STAGE_NAMES))],
    iteration: Annotated[int, Query(ge=1, le=1_000)] = 1,
) -> dict[str, Any]:
    """`card` is BOARD/CARD_ID (the tenant comes from the token): which layer won and why,
    every section and item with its tokens, and what was cut or dropped."""
    try:
        st = parse_stage(stage)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    store = svc.store.for_tenant(tenant)  # on PostgreSQL the database itself keeps other tenants out
    ref = _card_ref(tenant, card)  # an id no card can have is a 404 too, never the store's error (500)
    key = store.stored_card_key(ref.key) if ref is not None else None   # a renamed card by its new id too
    found = store.get_card(key) if key is not None else None
    if found is None:
        raise HTTPException(404, "not found")
    stored = store.current_tenant_prompt(tenant)
    tenant_prompt = stored.prompt if stored is not None else None
    settings = svc.config.assembly_settings(st)
    try:
        prompt = svc.runtime.assembler.assemble(
            AssemblyRequest(card=found, stage=st, iteration=iteration, tenant_prompt=tenant_prompt), settings)
    except AssemblyError as exc:
        raise HTTPException(500, f"configuration problem: {exc}") from None
    return {"card": f"{tenant}/{card}", **prompt.explain()}


@router.post("/cards/{card:path}/retry", summary="Run a card's failed stage again",
             responses={200: {"description": "the stage runs again"}, 401: {"description": "no valid token"},
                        404: {"description": "not the tenant's card"},
                        409: {"description": "the card's last stage run did not fail (the reason says why)"},
                        503: {"description": "Temporal or a worker did not answer: try again later"}})
async def retry_card(
    card: str,
    tenant: Annotated[str, Depends(require_tenant)],
    svc: Annotated[Services, Depends(services)],
) -> Any:
    """`card` is BOARD/CARD_ID. The stage whose run failed (e.g. the model stayed overloaded
    past its retry schedule) runs again on the card's workflow, its history kept."""
    ref = await _tenant_card(svc, tenant, card)
    stage = await _card_action(svc, tenant, "retried", lambda cards, **kw: cards.retry(ref, **kw))
    if isinstance(stage, JSONResponse):
        return stage
    return {"card": ref.key, "stage": stage, "status": "retrying"}


@router.post("/cards/{card:path}/cancel", summary="Stop a card's running stage, keeping its work",
             responses={200: {"description": "the stage run stopped; the run as recorded"},
                        401: {"description": "no valid token"}, 404: {"description": "not the tenant's card"},
                        409: {"description": "no stage of the card runs (the reason says why)"},
                        503: {"description": "Temporal or a worker did not answer: try again later"}})
async def cancel_card(
    card: str,
    tenant: Annotated[str, Depends(require_tenant)],
    svc: Annotated[Services, Depends(services)],
) -> Any:
    """`card` is BOARD/CARD_ID. The running stage run stops; its chat history, ledger rows and
    pushed commits stay, and the card waits (idle) for its next move."""
    ref = await _tenant_card(svc, tenant, card)
    run = await _card_action(svc, tenant, "cancelled", lambda cards, **kw: cards.cancel(ref, **kw))
    if isinstance(run, JSONResponse):
        return run
    return {"card": ref.key, "run": run.model_dump(mode="json")}


async def _card_action(svc: Services, tenant: str, done: str,
                       act: Callable[..., Awaitable[Any]]) -> Any:
    """What `act(cards, actor=..., timeout=...)` answers, or the error response: 503 without
    Temporal or when it does not answer in time, 409 when the card's workflow refuses."""
    if svc.cards is None:
        return JSONResponse({"detail": "Temporal is not configured for this API"}, status_code=503)
    try:
        return await act(svc.cards, actor=f"api:{tenant}", timeout=svc.config.temporal.rpc_timeout * 3)
    except RejectedError as err:
        return JSONResponse({"detail": str(err)}, status_code=409)
    except (RPCError, RuntimeError, ConfigError) as err:
        return JSONResponse({"detail": f"not {done}, try again later: {err}"}, status_code=503)


async def _tenant_card(svc: Services, tenant: str, card: str) -> CardRef:
    """The tenant's card BOARD/CARD_ID, or 404 (also for another tenant's: nothing is revealed)."""
    ref = _card_ref(tenant, card)
    store = svc.store.for_tenant(tenant)
    # A card moved to another team or project on its board is reached by its new id there too.
    found = await run_in_threadpool(store.stored_card_key, ref.key) if ref is not None else None
    if found is None:
        raise HTTPException(404, "not found")
    return CardRef.parse(found)


def _card_ref(tenant: str, card: str) -> CardRef | None:
    """The tenant's card BOARD/CARD_ID, or None when no card can have that id."""
    try:
        return CardRef.parse(f"{tenant}/{card}") if card.count("/") == 1 else None
    except ValueError:
        return None
