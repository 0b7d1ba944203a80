"""Is the model usable? One cheap authenticated request to the provider's endpoint before any
work starts: the models list (no tokens spent), with the profile's key and base URL.

A stage that cannot reach its model otherwise finds out only after its retry schedule has run
(minutes); a rejected key fails the stage at once but only after the stack started. The
preflight says either in a few seconds, in the words the stage would have used: the same
UpstreamError classification as a model call (errors.py). Plain httpx, no SDK: it is called
from the CLI before anything heavy is imported.

    check_endpoint("anthropic", api_key=key, base_url=None)   # None, or raises UpstreamError
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from cardloop.integrations.providers.errors import (
    bad_response,
    classify_status,
    connection_error,
    missing_key,
    redact,
    timeout_error,
)
from cardloop.integrations.upstream import UpstreamError

# Connecting is quick or not at all; a provider that answers does so within seconds.
CONNECT_SECONDS = 5.0
READ_SECONDS = 10.0
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
OPENAI_BASE_URL = "https://api.openai.com/v1"
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


def models_request(provider: str, *, api_key: str | None, base_url: str | None) -> tuple[str, dict[str, str]]:
    """The URL and headers of the provider's "list models" call, the smallest authenticated request."""
    if provider == "anthropic":
        # The SDK's base URL has no /v1 (it appends /v1/messages).
        base = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        return f"{base}/v1/models?limit=1", {"x-api-key": api_key or "", "anthropic-version": ANTHROPIC_VERSION}
    if provider == "openai":
        base = (base_url or OPENAI_BASE_URL).rstrip("/")
        return f"{base}/models", ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    if provider == "gemini":
        base = (base_url or GEMINI_BASE_URL).rstrip("/")
        return f"{base}/models?pageSize=1", {"x-goog-api-key": api_key or ""}
    raise ValueError(f"unknown provider {provider!r}")


def check_endpoint(provider: str, *, api_key: str | None, base_url: str | None,
                   connect_timeout: float = CONNECT_SECONDS, read_timeout: float = READ_SECONDS) -> None:
    """Raise the UpstreamError a model call would meet (kind connection, timeout, auth, ...),
    or return when the provider answered 2xx to this key."""
    if not api_key and not (provider == "openai" and base_url):
        raise missing_key(provider)
    url, headers = models_request(provider, api_key=api_key, base_url=base_url)
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            response = client.get(url, headers=headers)
    except httpx.TimeoutException as exc:
        raise timeout_error(provider, read_timeout, type(exc).__name__) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise UpstreamError(f"{provider}: bad base_url: {redact(str(exc), api_key)}", kind="invalid_request",
                            retryable=False) from None
    except httpx.TransportError as exc:
        raise connection_error(provider, redact(f"{type(exc).__name__}: {exc}", api_key)) from None
    if 200 <= response.status_code < 300:
        return
    text = redact(response.text, api_key)
    message, code = _details(response, text)
    if response.status_code < 400:
        raise bad_response(provider, f"HTTP {response.status_code} from {url.split('?')[0]}", response.status_code)
    raise classify_status(response.status_code, redact(message, api_key), _headers(response.headers),
                          provider=provider, code=code)


def _details(response: httpx.Response, text: str) -> tuple[str, str | None]:
    from cardloop.integrations.providers.http import error_details

    try:
        body = response.json()
    except ValueError:
        body = None
    return error_details(body, text)


def _headers(headers: httpx.Headers) -> Mapping[str, str]:
    return {k: v for k, v in headers.items()}


__all__ = ["check_endpoint", "models_request"]
