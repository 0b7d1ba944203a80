"""Refusals the app makes outside a route (no route for the path, a method the route does not
take, an unhandled error) in the error shape of the API the path speaks, as its routes do.

A board reads {"status": "refused", "detail"} from /webhooks/...; the OpenAI and Anthropic SDKs
pointed at /v1/... read only their own error objects (FastAPI's {"detail": "Not Found"} surfaces
in them as an error with no message); everything else answers the API's {"detail"}. Under /v1/
a path is Anthropic's when it is (/v1/messages...) or when the client says it speaks Anthropic
(its SDKs send anthropic-version, and their key as x-api-key); else OpenAI's."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers

from cardloop.app.api.gateway.answers import error_response
from cardloop.app.api.gateway.models import GatewayError

Family = Literal["webhook", "openai", "anthropic", "api"]
# The error code a gateway SDK gets for what the app refuses before any gateway route runs.
_GATEWAY_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}


def family(path: str, headers: Headers | Mapping[str, str]) -> Family:
    """Whose error shape `path` (within the app) answers in."""
    if path.startswith("/webhooks/") or path == "/webhooks":
        return "webhook"
    if path.startswith("/v1/") or path == "/v1":
        anthropic = path.startswith("/v1/messages") or "anthropic-version" in headers or "x-api-key" in headers
        return "anthropic" if anthropic else "openai"
    return "api"


def refusal(request: Request, status: int, detail: Any, headers: Mapping[str, str] | None = None,
            **extra: Any) -> Response:
    """`detail` answered with `status` in the shape of the request's path (see the module doc)."""
    if status in (204, 304) or status < 200:  # no body allowed
        return Response(status_code=status, headers=headers)
    path = request.url.path.removeprefix(request.scope.get("root_path") or "")
    shape = family(path, request.headers)
    if shape == "webhook":
        answer: Response = JSONResponse({"status": "refused", "detail": str(detail), **extra}, status_code=status)
    elif shape == "api":
        answer = JSONResponse({"detail": detail, **extra}, status_code=status)
    else:
        code = _GATEWAY_CODES.get(status, "invalid_request" if status < 500 else "internal_error")
        # The SDKs' error objects have no room for extra fields: they join the message.
        message = str(detail) + "".join(f"; {name} {value}" for name, value in extra.items())
        answer = error_response(shape, GatewayError(status, message, code=code), uuid.uuid4().hex)
    for name, value in (headers or {}).items():
        answer.headers[name] = value
    return answer
