"""An upstream service failed: one error type for model providers and context sources, and
the one reading of how long the service asked us to wait.

    UpstreamError          a call to a provider, GitHub, Kubernetes or a git remote failed;
                           never carries a credential
        .kind              what went wrong (KINDS), stable for code to branch on
        .retryable         False: the same call cannot succeed (bad request, auth, not found,
                           not configured); True: it may (rate limit, overload, 5xx, network)
        .retry_after       seconds the service asked us to wait (None: not said), capped;
                           activities/errors.py turns it into Temporal's next_retry_delay
        .status            the HTTP status, None when no response arrived

Retries belong to Temporal, so clients run with their own retries off and every failure
surfaces here once, classified.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any

# A service may ask for longer; past ten minutes a Temporal retry with its own backoff serves
# better than one activity attempt sleeping on a hint. A family whose limits reset on a longer
# clock (GitHub's hourly rate limit) passes its own cap.
MAX_RETRY_AFTER = 600.0

KINDS: tuple[str, ...] = (
    "rate_limited",  # 429 (or GitHub's 403 rate limit): wait and retry
    "overloaded",  # 529 (Anthropic) / 503 UNAVAILABLE (Gemini): retry
    "server",  # other 5xx: retry
    "timeout",  # no answer in time (client timeout or 408): retry
    "connection",  # refused, reset, DNS, TLS handshake: retry
    "conflict",  # 409: retry
    "bad_response",  # a 2xx whose body is not the service's shape: retry (proxies garble)
    "unavailable",  # the service failed in a way retrying may fix (a git fetch, a busy checkout)
    "invalid_request",  # 400/422 and other 4xx: our request is wrong, never retry
    "too_large",  # 413 or a prompt over the context window: re-assemble smaller, never retry
    "auth",  # 401/403 or no credentials: never retry
    "not_found",  # 404/410: never retry
    "spend_limit",  # spend limit, quota, billing, credit balance: never retry
    "blocked",  # the provider refused the prompt itself (Gemini promptFeedback): never retry
    "not_configured",  # this worker is not set up for the service (no kubeconfig, no git): never retry
    "forbidden",  # our own policy refuses the call ([tenants]: not this tenant's repository): never retry
)


class UpstreamError(Exception):
    def __init__(
        self,
        message: str,
        *,
        kind: str,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"UpstreamError(kind={self.kind!r}, status={self.status!r}, retryable={self.retryable!r}, "
            f"retry_after={self.retry_after!r}, message={self.message!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments defeat Exception's default pickling (used by executors and tests).
        return _rebuild, (self.message, self.kind, self.retryable, self.status, self.retry_after)


def _rebuild(message: str, kind: str, retryable: bool, status: int | None, retry_after: float | None
             ) -> UpstreamError:
    return UpstreamError(message, kind=kind, retryable=retryable, status=status, retry_after=retry_after)


def lower_keys(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def clamp_wait(seconds: float | None, *, cap: float = MAX_RETRY_AFTER, floor: float = 0.0) -> float | None:
    """A wait within [floor, cap]; None stays None and so does a garbled (non-finite) value."""
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, floor), cap)


def parse_retry_after(value: str, *, now: float | None = None) -> float | None:
    """`Retry-After` as delta-seconds (floats tolerated) or an HTTP date; None when unreadable."""
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - (time.time() if now is None else now)
    return seconds if math.isfinite(seconds) else None


def retry_after_header(headers: Mapping[str, Any] | None, *, now: float | None = None) -> float | None:
    """The wait a response's headers ask for, uncapped: `retry-after-ms`, else `retry-after`."""
    lowered = lower_keys(headers)
    if "retry-after-ms" in lowered:
        try:
            seconds = float(lowered["retry-after-ms"]) / 1000.0
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds):
            return seconds
    if "retry-after" in lowered:
        return parse_retry_after(lowered["retry-after"], now=now)
    return None
