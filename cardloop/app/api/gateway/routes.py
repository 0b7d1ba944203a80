"""The gateway's two routes: read the request, run the blocking work (store, prompt assembly,
provider) in the threadpool, and answer whole or as a stream in the caller's protocol."""

from __future__ import annotations

import functools
import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from cardloop.app.api.auth import bearer_token
from cardloop.app.api.gateway.answers import anthropic_body, error_response, openai_body, warnings_header
from cardloop.app.api.gateway.layering import prepare
from cardloop.app.api.gateway.models import GatewayError, Protocol
from cardloop.app.api.gateway.provider import complete, open_stream
from cardloop.app.api.gateway.streaming import (
    LiveResponse,
    anthropic_events,
    live_anthropic_events,
    live_openai_events,
    openai_events,
)
from cardloop.app.api.gateway.validation import read_request
from cardloop.app.api.services import Services, services

router = APIRouter(tags=["gateway"])

OPENAI_PATH, ANTHROPIC_PATH = "/v1/chat/completions", "/v1/messages"


ServicesDep = Annotated[Services, Depends(services)]


def caller_token(request: Request, protocol: Protocol) -> str | None:
    """The tenant API token: `Authorization: Bearer` on both routes; on the Anthropic route also
    `x-api-key`, where Anthropic's clients send their key."""
    token = bearer_token(request)
    if token is None and protocol == "anthropic":
        token = request.headers.get("x-api-key", "").strip() or None
    return token


def _tenant_of(request: Request, svc: Services, protocol: Protocol) -> str | None:
    token = caller_token(request, protocol)
    return svc.store.tenant_for_token(token) if token else None


# Dependencies (tests may override them): the token's tenant, or None, which _serve answers with a
# 401 in the caller's own error shape (an HTTPException would answer FastAPI's {"detail": ...}).
def openai_tenant(request: Request, svc: ServicesDep) -> str | None:
    return _tenant_of(request, svc, "openai")


def anthropic_tenant(request: Request, svc: ServicesDep) -> str | None:
    return _tenant_of(request, svc, "anthropic")


AUTH_HELP = {"openai": "send it as 'Authorization: Bearer <token>'",
             "anthropic": "send it as 'x-api-key: <token>' or 'Authorization: Bearer <token>'"}


def _unauthorized(request: Request, protocol: Protocol) -> GatewayError:
    sent = caller_token(request, protocol) is not None
    what = "the API token is not valid (unknown or revoked)" if sent else "no API token was sent"
    return GatewayError(401, f"{what}: the gateway needs a cardloop API token of your tenant (cl_...); "
                             f"{AUTH_HELP[protocol]}", code="invalid_api_key")


@router.post(OPENAI_PATH, summary="OpenAI-compatible chat completions through the prompt gateway")
async def chat_completions(request: Request, tenant: Annotated[str | None, Depends(openai_tenant)],
                           svc: ServicesDep) -> Response:
    """Needs a tenant API token: `Authorization: Bearer cl_...`."""
    return await _serve(request, tenant, svc, "openai")


@router.post(ANTHROPIC_PATH, summary="Anthropic-compatible messages through the prompt gateway")
async def messages(request: Request, tenant: Annotated[str | None, Depends(anthropic_tenant)],
                   svc: ServicesDep) -> Response:
    """Needs a tenant API token: `x-api-key: cl_...` or `Authorization: Bearer cl_...`."""
    return await _serve(request, tenant, svc, "anthropic")


def too_large(max_bytes: int) -> GatewayError:
    return GatewayError(413, f"request body larger than {max_bytes:,} bytes", code="too_large")


async def _serve(request: Request, tenant: str | None, svc: Services, protocol: Protocol) -> Response:
    call_id = uuid.uuid4().hex
    try:
        if tenant is None:
            raise _unauthorized(request, protocol)
        raw = await request.body()
        if len(raw) > svc.config.api.max_body_bytes:
            # The app's BodySizeLimit refuses first (app.py, in this shape); this holds the router alone.
            raise too_large(svc.config.api.max_body_bytes)
        call = read_request(raw, protocol)
        # Store, prompt assembly and the provider call all block: keep them off the event loop.
        prepared = await run_in_threadpool(prepare, svc, tenant, call)
        # The token's id: its own limits ([limits] per_token) and its rows in the ledger.
        token = caller_token(request, protocol)
        token_id = await run_in_threadpool(svc.store.api_token_id, tenant, token) if token else None
        live = (await run_in_threadpool(functools.partial(open_stream, token_id=token_id), svc, tenant, call,
                                        call_id, prepared) if call.stream else None)
        outcome = None if live else await run_in_threadpool(
            functools.partial(complete, token_id=token_id), svc, tenant, call, call_id, prepared)
    except GatewayError as exc:
        answer = error_response(protocol, exc, call_id)
        if exc.status == 401:
            answer.headers["www-authenticate"] = "Bearer"
        return answer
    headers = {"x-cardloop-call-id": f"gateway/{call_id}"}
    if call.ignored:
        headers["x-cardloop-ignored-params"] = ", ".join(call.ignored)
    if prepared.redactions:
        headers["x-cardloop-redactions"] = str(prepared.redactions)
    # What the gateway changed in the request (media left as placeholders...): the caller's to know.
    if (warned := warnings_header(prepared.warnings)) is not None:
        headers["x-cardloop-warnings"] = warned
    created = int(svc.clock())
    if live is not None:
        # A sync iterator: Starlette pulls each event in a worker thread, so the blocking provider
        # read and the usage write stay off the event loop.
        events = (live_openai_events(live, created, call.include_usage) if protocol == "openai"
                  else live_anthropic_events(live))
        return LiveResponse(events, live, headers={**headers, "cache-control": "no-cache"})
    assert outcome is not None
    if call.stream:
        events = (openai_events(outcome, created, call.include_usage) if protocol == "openai"
                  else anthropic_events(outcome))
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={**headers, "cache-control": "no-cache"})
    body = openai_body(outcome, created) if protocol == "openai" else anthropic_body(outcome)
    return JSONResponse(body, headers=headers)
