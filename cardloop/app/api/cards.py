"""GET /cards/{card}/prompt: the prompt core's explain for one of the tenant's cards."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query

from cardloop.app.api.auth import require_tenant
from cardloop.app.api.services import Services, services
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
    found = store.get_card(f"{tenant}/{card}") if card.count("/") == 1 else None
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
