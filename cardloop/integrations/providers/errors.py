"""How a provider's failure becomes an UpstreamError, the same way for every provider:
the HTTP status, the provider's own error code and message, and how long it asked us to wait
(Retry-After, or the rate-limit reset headers on a 429)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime

from cardloop.integrations.upstream import (
    UpstreamError,
    clamp_wait,
    lower_keys,
    retry_after_header,
)

# Message fragments that mark a 4xx as money, not throughput: waiting does not help.
_SPEND_PATTERNS = re.compile(
    r"spend(ing)? limit|credit balance|billing|quota exceeded|exceeded your current quota"
    r"|insufficient_quota|api usage limits",
    re.IGNORECASE,
)
# Machine-readable codes providers send for the same cases (Anthropic error.details.error_code,
# OpenAI error.code / error.type).
SPEND_CODES = frozenset({
    "insufficient_quota",
    "billing_hard_limit_reached",
    "billing_not_active",
    "enforced_spend_limit_reached",
    "contract_spend_limit_reached",
    "linked_organization_spend_limit_reached",
    "linked_organization_billing_unavailable",
    "billing_error",
})
_TOO_LARGE_PATTERNS = re.compile(
    r"prompt is too long|context length|context_length_exceeded|context window|too many tokens"
    r"|input token count.*exceeds",
    re.IGNORECASE,
)



_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float | None:
    """OpenAI's x-ratelimit-reset-* durations: "1s", "6m0s", "20ms", "1h2m3.5s"; bare numbers are seconds."""
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)




def _parse_timestamp(value: str, now: float) -> float | None:
    # anthropic-ratelimit-*-reset is RFC 3339 ("2024-05-15T10:11:12Z").
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp() - now


def _reset_hint(lowered: Mapping[str, str], now: float) -> float | None:
    """Seconds until the exhausted rate limit resets, from Anthropic's or OpenAI's reset headers.

    Prefer the limits whose `remaining` is 0 (the ones that refused us; the longest of them,
    since all must recover); without remaining-counts, the earliest reset is the best guess.
    """
    exhausted: list[float] = []
    others: list[float] = []
    for name, value in lowered.items():
        if name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            limit = name[len("anthropic-ratelimit-") : -len("-reset")]
            seconds = _parse_timestamp(value, now)
            remaining = lowered.get(f"anthropic-ratelimit-{limit}-remaining")
        elif name.startswith("x-ratelimit-reset-"):
            limit = name[len("x-ratelimit-reset-") :]
            seconds = parse_duration(value)
            remaining = lowered.get(f"x-ratelimit-remaining-{limit}")
        else:
            continue
        if seconds is None:
            continue
        (exhausted if remaining is not None and remaining.strip() == "0" else others).append(seconds)
    if exhausted:
        return max(exhausted)
    if others:
        return min(others)
    return None


def retry_after_from(
    headers: Mapping[str, str], *, now: float | None = None, rate_limit_resets: bool = True
) -> float | None:
    """How long the provider asked us to wait, in seconds within [0, MAX_RETRY_AFTER], or None.

    Order: `retry-after-ms`, `retry-after` (seconds or HTTP date), then, when
    `rate_limit_resets`, the rate-limit reset headers (anthropic-ratelimit-*-reset,
    x-ratelimit-reset-*). Providers send those on every response, so they only mean
    "wait until then" on a 429.
    """
    now = time.time() if now is None else now
    seconds = retry_after_header(headers, now=now)
    if seconds is None and rate_limit_resets:
        seconds = _reset_hint(lower_keys(headers), now)
    return clamp_wait(seconds)


def redact(text: str, secret: str | None) -> str:
    """Remove `secret` from text a server sent back: some echo the key they rejected."""
    if secret and len(secret) >= 4 and secret in text:
        return text.replace(secret, "***")
    return text


def is_spend_limit(message: str, code: str | None = None) -> bool:
    return (code is not None and code.lower() in SPEND_CODES) or bool(_SPEND_PATTERNS.search(message))


def classify_status(
    status: int,
    message: str,
    headers: Mapping[str, str],
    *,
    provider: str = "",
    code: str | None = None,
    retry_hint: float | None = None,
) -> UpstreamError:
    """Turn an HTTP error response into a UpstreamError, the same way for every provider.

    `message` is the provider's own error text (already free of secrets); `code` is its
    machine-readable error code when it has one; `retry_hint` is a wait the body itself
    asked for (Gemini's RetryInfo), used when the headers say nothing. A 429 that carries
    such a hint is a rate limit even if it says "quota": per-minute quotas reset, spend
    limits do not come with a retry delay.
    """
    prefix = f"{provider}: " if provider else ""
    detail = message.strip() or "no error message"
    text = f"{prefix}HTTP {status}: {detail}"
    lowered = lower_keys(headers)
    spend = is_spend_limit(message, code)

    def fail(kind: str) -> UpstreamError:
        return UpstreamError(text, kind=kind, retryable=False, status=status)

    def retry(kind: str) -> UpstreamError:
        wait = retry_after_from(lowered, rate_limit_resets=status == 429)
        if wait is None:
            wait = clamp_wait(retry_hint)
        return UpstreamError(text, kind=kind, retryable=True, status=status, retry_after=wait)

    if status == 429:
        if spend and retry_hint is None:
            return fail("spend_limit")
        return retry("rate_limited")
    if status == 529:
        return retry("overloaded")
    if status == 408:
        return retry("timeout")
    if status == 409:
        return retry("conflict")
    if status >= 500:
        return retry("overloaded" if status == 503 and "overload" in message.lower() else "server")
    if spend or status == 402:
        return fail("spend_limit")
    if status in (401, 403):
        return fail("auth")
    if status == 404:
        return fail("not_found")
    if status == 413 or (status == 400 and bool(_TOO_LARGE_PATTERNS.search(message))) or (
        code is not None and code == "context_length_exceeded"
    ):
        return fail("too_large")
    # 400, 422 and every other 4xx (and anything unexpected): the request itself is wrong.
    return fail("invalid_request")


def timeout_error(provider: str, timeout: float | None, detail: str = "") -> UpstreamError:
    after = f" after {timeout:g} s" if timeout is not None else ""
    extra = f" ({detail})" if detail else ""
    return UpstreamError(f"{provider}: request timed out{after}{extra}", kind="timeout", retryable=True)


def connection_error(provider: str, detail: str) -> UpstreamError:
    return UpstreamError(f"{provider}: connection failed: {detail}", kind="connection", retryable=True)


def bad_response(provider: str, detail: str, status: int | None = None) -> UpstreamError:
    return UpstreamError(f"{provider}: unexpected response: {detail}", kind="bad_response", retryable=True,
                         status=status)


def missing_key(provider: str) -> UpstreamError:
    return UpstreamError(f"{provider}: no API key configured", kind="auth", retryable=False)
