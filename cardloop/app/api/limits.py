"""Request body size limit as ASGI middleware: a body larger than the limit is refused with
413 before the route reads it, whether or not the sender declared Content-Length.

The refusal is {"detail": ...} unless `shaped` answers for the request: paths that speak another
API's error shape (webhooks, the prompt gateway's OpenAI and Anthropic routes) give their own."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]
# (the request's scope, the limit) -> an ASGI response to send instead of {"detail"}, or None.
Shaped = Callable[[Scope, int], Any]


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int, shaped: Shaped | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.shaped = shaped

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        seen = 0
        started = over = False

        async def limited_receive() -> dict[str, Any]:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    raise BodyTooLarge
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            if over and not started:
                # Whatever the app made of a body cut short is no answer: FastAPI turns the error
                # raised while it reads a route's model into its own 400 ("There was an error
                # parsing the body"). The body was too large, so the answer is 413.
                raise BodyTooLarge
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Any, send: Any) -> None:
        answer = self.shaped(scope, self.max_bytes) if self.shaped is not None else None
        if answer is not None:
            await answer(scope, receive, send)
            return
        body = json.dumps({"detail": f"request body larger than {self.max_bytes:,} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
