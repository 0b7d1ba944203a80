"""The codec server: Temporal's remote codec protocol over HTTP, so the Temporal UI and CLI show
decoded payloads while the database keeps them encrypted.

    POST /encode, POST /decode   body and answer {"payloads": [Payload as proto JSON]}; header X-Namespace
    GET  /healthz

With a token configured, /encode and /decode need `Authorization: Bearer <token>` (the Temporal
CLI sends it with `--codec-auth`); without one the server only binds to a loopback address.
CORS admits the Temporal UI's origin, which calls the server from the operator's browser.
"""

from __future__ import annotations

import hmac

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from cardloop.app.codec import AesGcmCodec, CodecError, is_loopback
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.secrets import Secret

MAX_BODY_BYTES = 8 * 1024 * 1024


def create_codec_app(codec: AesGcmCodec, *, token: Secret | None, cors_origins: list[str]) -> FastAPI:
    app = FastAPI(title="cardloop codec server", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=["POST", "OPTIONS"],
                       allow_headers=["content-type", "x-namespace", "authorization"], allow_credentials=True)

    def authorize(request: Request) -> None:
        if token is None:
            return
        # The scheme is case-insensitive (RFC 9110 11.1): "bearer <token>" is the same credential.
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.reveal().encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    async def payloads_of(request: Request) -> Payloads:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise HTTPException(413, f"body over {MAX_BODY_BYTES} bytes")
        try:
            return json_format.Parse(body or b"{}", Payloads())
        except json_format.ParseError as exc:
            raise HTTPException(400, f"not a Payloads JSON object: {exc}") from None

    def answer(payloads: list) -> Response:
        return Response(json_format.MessageToJson(Payloads(payloads=payloads)), media_type="application/json")

    @app.post("/encode")
    async def encode(request: Request) -> Response:
        authorize(request)
        return answer(await codec.encode((await payloads_of(request)).payloads))

    @app.post("/decode")
    async def decode(request: Request) -> Response:
        authorize(request)
        try:
            return answer(await codec.decode((await payloads_of(request)).payloads))
        except CodecError as exc:
            raise HTTPException(422, str(exc)) from None

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def codec_app_for(config: Config, codec: AesGcmCodec, *, host: str, extra_origins: list[str] | None = None) -> FastAPI:
    """The app for `cardloop codec-server` and the dev stack; refuses an open server off loopback."""
    cs = config.codec_server
    token = config.secret(cs.token_env) if cs.token_env else None
    if token is None and not is_loopback(f"{host}:0"):
        raise ConfigError(f"codec_server: binding {host} without a token would decrypt for anyone: set "
                          f"{cs.token_env or 'codec_server.token_env'} or bind 127.0.0.1")
    origins = list(dict.fromkeys([*cs.cors_origins, *(extra_origins or [])]))
    return create_codec_app(codec, token=token, cors_origins=origins)
