"""The FastAPI app: board webhooks, tenant prompt management, card prompts, the prompt gateway.

`create_app(services)` wires routers around shared Services; `build_services(config)`
connects the store, Temporal and the board adapters for `cardloop api` / `cardloop dev`."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from temporalio.client import Client

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api import cards, gateway, tenants, webhooks
from cardloop.app.api.docs import add_docs
from cardloop.app.api.limits import BodySizeLimit
from cardloop.app.api.logsafe import safe_logger
from cardloop.app.api.paths import TrailingSlash
from cardloop.app.api.services import Services
from cardloop.app.api.shapes import refusal
from cardloop.app.cards import CardService
from cardloop.app.malloc import return_large_blocks
from cardloop.app.temporal import TemporalLink
from cardloop.contracts.config import Config
from cardloop.contracts.payloads import build_models
from cardloop.prompts.surrogates import printable
from cardloop.store import Store

log = safe_logger(__name__)


async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    """400 with field-level messages rather than FastAPI's 422: a malformed body is a bad request.
    The sender's input is not echoed, and `printable` keeps a lone surrogate in a key or a
    message from making the answer itself unencodable (FastAPI's own handler then fails: 500)."""
    problems = [{"loc": printable(".".join(str(p) for p in e["loc"])), "msg": printable(_message(request, e))}
                for e in exc.errors()]
    return JSONResponse({"detail": "invalid request", "problems": problems}, status_code=400)


# pydantic's words for "the body is not an object", which read as if the sender wrote Python.
_NOT_AN_OBJECT = {"model_attributes_type", "model_type", "dict_type"}


def _message(request: Request, error: Any) -> str:
    if tuple(error["loc"]) != ("body",) or error["type"] not in _NOT_AN_OBJECT:
        return str(error["msg"])
    sent = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if sent and sent != "application/json" and not sent.endswith("+json"):
        return f"the body must be a JSON object sent as application/json (it was sent as {sent})"
    return "the body must be a JSON object"


def create_app(svc: Services) -> FastAPI:
    build_models()  # the payload models, before the first request (payloads.py)
    return_large_blocks()  # the gateway assembles prompts as a worker does (malloc.py)
    app = FastAPI(
        title="cardloop",
        version="0.1.0",
        description="Board webhooks drive card workflows on Temporal; tenants manage their prompts; "
                    "the prompt gateway layers any request under the guardrails and the tenant's prompt.",
        docs_url=None, redoc_url=None,  # add_docs serves them from local assets, not a CDN
    )
    app.state.services = svc
    add_docs(app)

    app.add_exception_handler(RequestValidationError, bad_request)  # type: ignore[arg-type]

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # No route for the path, a method the route does not take, a route's own HTTPException:
        # in the shape of the API the path speaks (shapes.py), its headers (Allow...) kept.
        return refusal(request, exc.status_code, exc.detail, exc.headers)

    @app.exception_handler(ClientDisconnect)
    async def disconnected(request: Request, exc: ClientDisconnect) -> Response:
        # The client went away mid-body: nothing was applied and nobody reads the answer. One
        # line, no traceback: it is the network's doing, not an error of ours.
        log.warning("client disconnected before its request body was read: %s %s", request.method,
                    request.url.path)
        return refusal(request, 400, "client disconnected")

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        incident = uuid.uuid4().hex[:12]
        log.exception("unhandled error %s on %s %s", incident, request.method, request.url.path)
        return refusal(request, 500, "internal error", incident=incident)

    @app.get("/livez", tags=["ops"], summary="Liveness: the app's event loop answers (nothing else)")
    async def livez() -> dict[str, str]:
        """For a liveness probe: 200 whenever the process can answer. The store and Temporal are
        /healthz's business: their outage makes the API unready, and a restart would not help."""
        return {"status": "ok"}

    @app.get("/healthz", tags=["ops"], summary="Readiness: the app and its store answer; Temporal's state")
    async def healthz() -> Any:
        """200 while the app and its store answer. `temporal` is what a probe found (cached
        for a second or two): "connected", or why not; webhooks answer 503 meanwhile. 503 with
        the reason while the store does not answer (a database outage is no reason for a 500)."""
        try:
            await run_in_threadpool(svc.store.schema_version)
        except Exception as exc:  # any store failure is the answer's reason
            log.warning("health: the store does not answer: %s", str(exc)[:300])
            return JSONResponse({"status": "unavailable", "store": f"unavailable: {type(exc).__name__}"},
                                status_code=503)
        if svc.cards is None:
            return {"status": "ok", "temporal": "not configured"}
        ok, detail = await svc.cards.link.status()
        return {"status": "ok", "temporal": "connected" if ok else "unavailable",
                **({} if ok else {"temporal_detail": detail})}

    for module in (webhooks, tenants, cards, gateway):
        app.include_router(module.router)

    def too_large(scope: dict[str, Any], max_bytes: int) -> Any:
        # A board's delivery is counted as invalid by its route's metric; every path gets its shape.
        request = Request(scope)
        path = request.url.path.removeprefix(scope.get("root_path") or "")
        return (webhooks.too_large_answer(path, max_bytes, svc.adapters)
                or refusal(request, 413, f"request body larger than {max_bytes:,} bytes"))

    app.add_middleware(BodySizeLimit, max_bytes=svc.config.api.max_body_bytes, shaped=too_large)
    app.router.redirect_slashes = False  # TrailingSlash serves the path instead (paths.py)
    app.add_middleware(TrailingSlash)
    return app


async def build_services(config: Config, store: Store, runtime: ActivityDeps | None = None,
                         client: Client | TemporalLink | None = None) -> Services:
    """Without a client, Temporal is connected in the background: the API serves meanwhile."""
    from cardloop.app.boards.adapters import build_adapters

    if client is None:
        client = TemporalLink(config, say=lambda line: log.warning("%s", line)).start()
    http = httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=5.0))
    return Services(config=config, store=store, runtime=runtime or ActivityDeps.build(config, store),
                    cards=CardService(client, store, config), http=http,
                    adapters=build_adapters(config, http))
