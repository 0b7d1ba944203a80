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

# What an error object says its status is, when it arrives in a 2xx answer (LiteLLM, OpenRouter
# and other proxies answer 200 with the upstream's error; so do some servers mid-generation):
# Google's RPC status names (Gemini's error.status), then OpenAI's error types.
_RPC_STATUS = {
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400, "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ABORTED": 409, "ALREADY_EXISTS": 409, "RESOURCE_EXHAUSTED": 429,
    "INTERNAL": 500, "UNKNOWN": 500, "DATA_LOSS": 500, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
}
_TYPE_STATUS = {
    "invalid_request_error": 400, "context_length_exceeded": 400, "authentication_error": 401,
    "permission_error": 403, "not_found_error": 404, "rate_limit_error": 429, "insufficient_quota": 429,
    "server_error": 500, "api_error": 500, "service_unavailable": 503, "overloaded_error": 529,
}


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


def status_of_error(err: Any) -> int | None:
    """The HTTP status an error object names (its numeric code, Google's status, OpenAI's type
    or code), or None when it names none."""
    if not isinstance(err, dict):
        return None
    code = err.get("code")
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    for value in (err.get("status"), err.get("type"), code):
        if isinstance(value, str):
            found = _RPC_STATUS.get(value) or _TYPE_STATUS.get(value)
            if found is not None:
                return found
    return None


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
    status = response.status_code
    if isinstance(parsed, dict) and 200 <= status < 300 and parsed.get("error"):
        # An error object in a 2xx answer: classified like the status it names, so a refusal is
        # not retried and an overload is; its own words reach the caller either way.
        named = status_of_error(parsed["error"])
        if named is None:
            message, _ = error_details(parsed, text)
            raise bad_response(provider, f"HTTP {status} carrying an error: {redact(message, secret)}", status)
        error = _classified(named, parsed, text, response.headers, provider=provider, secret=secret,
                            classify=classify)
        raise UpstreamError(f"{error.message} (an error inside an HTTP {status} answer)", kind=error.kind,
                            retryable=error.retryable, status=error.status, retry_after=error.retry_after)
    if status >= 400 or status < 200:
        raise _classified(status, parsed, text, response.headers, provider=provider, secret=secret,
                          classify=classify)
    if not isinstance(parsed, dict):
        raise bad_response(provider, f"HTTP {status} body is not a JSON object: {text[:200]!r}", status)
    return parsed


def _classified(status: int, parsed: Any, text: str, headers: Mapping[str, str], *, provider: str,
                secret: str | None, classify: Any) -> UpstreamError:
    if classify is not None:
        special = classify(status, parsed, text, headers)
        if special is not None:
            return special
    message, code = error_details(parsed, text)
    return classify_status(status, redact(message, secret), headers, provider=provider, code=code)


def as_int(value: Any) -> int:
    """Token counts from JSON: missing, null or malformed count as 0 rather than failing a paid call."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0
