"""What the providers that speak plain JSON over httpx (OpenAI-compatible, Gemini) share: one
TLS context, timeouts, one POST that answers JSON or raises a classified UpstreamError."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from typing import Any

import httpx

from cardloop.integrations.providers.errors import (
    bad_response,
    classify_status,
    connection_error,
    redact,
    timeout_error,
)
from cardloop.integrations.upstream import UpstreamError

CONNECT_TIMEOUT = 10.0


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verified TLS context for every httpx provider: building one (loading the CA bundle)
    costs tens of milliseconds, and a context is safe to share between clients and threads."""
    return httpx.create_ssl_context()


def http_timeout(timeout: float) -> httpx.Timeout:
    """`timeout` bounds each read/write; connecting gets at most CONNECT_TIMEOUT so an
    unreachable host fails fast instead of holding an activity for the whole model budget."""
    return httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))


def error_details(body: Any, text: str) -> tuple[str, str | None]:
    """The provider's own error message and code from an error body.

    Knows OpenAI ({"error": {"message", "type", "code"}}), Gemini ({"error": {"message",
    "status"}}), vLLM ({"message", "type", "code"} at the top) and FastAPI ({"detail"}).
    """
    message: Any = None
    code: Any = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            message = err.get("message")
            code = err.get("code") if isinstance(err.get("code"), str) else err.get("type") or err.get("status")
        elif isinstance(err, str):
            message = err
        elif "message" in body:
            message = body.get("message")
            code = body.get("code") if isinstance(body.get("code"), str) else body.get("type")
        elif "detail" in body:
            message = body.get("detail")
    if isinstance(message, list | dict):
        message = str(message)  # FastAPI's validation detail is a list of dicts
    if not isinstance(message, str) or not message.strip():
        message = text.strip()
    return message[:2000], (code if isinstance(code, str) else None)


def post_json(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    *,
    provider: str,
    headers: Mapping[str, str],
    timeout: float,
    secret: str | None,
    classify: Any = None,
) -> dict[str, Any]:
    """POST `body` and return the JSON answer, or raise a classified UpstreamError.

    `classify(status, body_json, text, headers)` may return a UpstreamError for provider-specific
    cases; None falls back to classify_status.
    """
    try:
        response = client.post(url, json=body, headers=dict(headers))
    except httpx.TimeoutException as exc:
        raise timeout_error(provider, timeout, type(exc).__name__) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        # A wrong base_url in config: retrying cannot fix it.
        raise UpstreamError(f"{provider}: bad base_url: {redact(str(exc), secret)}", kind="invalid_request",
                            retryable=False) from None
    except httpx.TransportError as exc:
        raise connection_error(provider, redact(f"{type(exc).__name__}: {exc}", secret)) from None
    except httpx.HTTPError as exc:
        raise bad_response(provider, redact(f"{type(exc).__name__}: {exc}", secret)) from None
    text = redact(response.text, secret)
    try:
        parsed: Any = response.json()
    except ValueError:
        parsed = None
    if response.status_code >= 400 or response.status_code < 200:
        if classify is not None:
            special = classify(response.status_code, parsed, text, response.headers)
            if special is not None:
                raise special
        message, code = error_details(parsed, text)
        raise classify_status(response.status_code, redact(message, secret), response.headers,
                              provider=provider, code=code)
    if not isinstance(parsed, dict):
        raise bad_response(provider, f"HTTP {response.status_code} body is not a JSON object: {text[:200]!r}",
                           response.status_code)
    return parsed


def as_int(value: Any) -> int:
    """Token counts from JSON: missing, null or malformed count as 0 rather than failing a paid call."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0
