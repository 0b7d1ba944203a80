"""What every LLM provider returns and raises, and the one error classification they share.

Exceptions:

    ProviderError                 one failed model call; never carries the API key
        .kind        what went wrong (KINDS below), stable for code to branch on
        .retryable   False: retrying the same request cannot succeed (bad request, auth,
                     spend limit); True: it may (rate limit, overload, 5xx, network)
        .retry_after seconds the provider asked us to wait (None: not said), capped at
                     MAX_RETRY_AFTER; the activity turns it into next_retry_delay
        .status      the HTTP status, None when no response arrived

Retries belong to Temporal (DESIGN.md), so clients are built with their own retries off and
every failure surfaces here exactly once, classified the same way for every provider.
"""

from __future__ import annotations

import email.utils
import functools
import math
import re
import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import httpx

from cardloop.prompts.conversation import Conversation, ToolUse

# The provider may ask for longer; past ten minutes a Temporal retry with its own backoff
# serves better than one activity attempt sleeping on a hint.
MAX_RETRY_AFTER = 600.0

KINDS: tuple[str, ...] = (
    "rate_limited",  # 429: wait and retry
    "overloaded",  # 529 (Anthropic) / 503 UNAVAILABLE (Gemini): retry
    "server",  # other 5xx: retry
    "timeout",  # no answer in time (client timeout or 408): retry
    "connection",  # refused, reset, DNS: retry
    "conflict",  # 409: retry
    "bad_response",  # a 2xx whose body is not the provider's shape: retry (proxies garble)
    "invalid_request",  # 400/422 and other 4xx: our request is wrong, never retry
    "too_large",  # 413 or a prompt over the context window: re-assemble smaller, never retry
    "auth",  # 401/403 or no API key: never retry
    "not_found",  # 404, usually an unknown model: never retry
    "spend_limit",  # spend limit, quota, billing, credit balance: never retry
    "blocked",  # the provider refused the prompt itself (Gemini promptFeedback): never retry
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


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. input_tokens excludes cache reads and writes (Anthropic's meaning),
    so the three input fields add up to the whole prompt and each has its own price."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Completion:
    """One model turn. stop_reason uses Anthropic's words for all providers: end_turn,
    max_tokens, stop_sequence, refusal (others pass through lower-cased)."""

    text: str
    usage: Usage
    stop_reason: str | None
    model: str
    response_id: str | None
    # The tools the model asked to run (when the conversation offered tools); text holds only
    # the reply's own text.
    tool_calls: tuple[ToolUse, ...] = ()


@dataclass(frozen=True)
class StreamStart:
    """A streamed turn has begun: the provider accepted the request. `usage` holds the input side."""

    usage: Usage
    model: str
    response_id: str | None


@dataclass(frozen=True)
class TextDelta:
    """The next piece of a streamed turn's text, as the provider produced it."""

    text: str


# What StreamingProvider.stream yields: one StreamStart, TextDeltas, then the turn's Completion
# (its text is the deltas joined, its usage the whole call's); nothing follows the Completion.
StreamEvent = StreamStart | TextDelta | Completion


class ProviderError(Exception):
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
            f"ProviderError(kind={self.kind!r}, status={self.status!r}, retryable={self.retryable!r}, "
            f"retry_after={self.retry_after!r}, message={self.message!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments defeat Exception's default pickling (used by executors and tests).
        return _rebuild_error, (self.message, self.kind, self.retryable, self.status, self.retry_after)


def _rebuild_error(
    message: str, kind: str, retryable: bool, status: int | None, retry_after: float | None
) -> ProviderError:
    return ProviderError(message, kind=kind, retryable=retryable, status=status, retry_after=retry_after)


@runtime_checkable
class Provider(Protocol):
    name: str

    def complete(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Completion: ...


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream a turn. Failures before or during the stream raise the
    same classified ProviderError as complete(), from the iterator's next()."""

    def stream(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Iterator[StreamEvent]: ...


def redact(text: str, secret: str | None) -> str:
    """Remove `secret` from text a server sent back: some echo the key they rejected."""
    if secret and len(secret) >= 4 and secret in text:
        return text.replace(secret, "***")
    return text


def _lower_keys(headers: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _seconds_until(when: datetime, now: float) -> float:
    return when.timestamp() - now


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
        seconds = _seconds_until(parsed, time.time() if now is None else now)
    return seconds if math.isfinite(seconds) else None


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
    return _seconds_until(parsed, now)


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
    """How long the server asked us to wait, in seconds within [0, MAX_RETRY_AFTER], or None.

    Order: `retry-after-ms`, `retry-after` (seconds or HTTP date), then, when
    `rate_limit_resets`, the rate-limit reset headers (anthropic-ratelimit-*-reset,
    x-ratelimit-reset-*). Providers send those on every response, so they only mean
    "wait until then" on a 429.
    """
    lowered = _lower_keys(headers)
    now = time.time() if now is None else now
    seconds: float | None = None
    if "retry-after-ms" in lowered:
        try:
            seconds = float(lowered["retry-after-ms"]) / 1000.0
        except ValueError:
            seconds = None
    if seconds is None and "retry-after" in lowered:
        seconds = parse_retry_after(lowered["retry-after"], now=now)
    if seconds is None and rate_limit_resets:
        seconds = _reset_hint(lowered, now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


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
) -> ProviderError:
    """Turn an HTTP error response into a ProviderError, the same way for every provider.

    `message` is the provider's own error text (already free of secrets); `code` is its
    machine-readable error code when it has one; `retry_hint` is a wait the body itself
    asked for (Gemini's RetryInfo), used when the headers say nothing. A 429 that carries
    such a hint is a rate limit even if it says "quota": per-minute quotas reset, spend
    limits do not come with a retry delay.
    """
    prefix = f"{provider}: " if provider else ""
    detail = message.strip() or "no error message"
    text = f"{prefix}HTTP {status}: {detail}"
    lowered = _lower_keys(headers)
    spend = is_spend_limit(message, code)

    def fail(kind: str) -> ProviderError:
        return ProviderError(text, kind=kind, retryable=False, status=status)

    def retry(kind: str) -> ProviderError:
        wait = retry_after_from(lowered, rate_limit_resets=status == 429)
        if wait is None and retry_hint is not None and math.isfinite(retry_hint):
            wait = min(max(retry_hint, 0.0), MAX_RETRY_AFTER)
        return ProviderError(text, kind=kind, retryable=True, status=status, retry_after=wait)

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


def timeout_error(provider: str, timeout: float | None, detail: str = "") -> ProviderError:
    after = f" after {timeout:g} s" if timeout is not None else ""
    extra = f" ({detail})" if detail else ""
    return ProviderError(f"{provider}: request timed out{after}{extra}", kind="timeout", retryable=True)


def connection_error(provider: str, detail: str) -> ProviderError:
    return ProviderError(f"{provider}: connection failed: {detail}", kind="connection", retryable=True)


def bad_response(provider: str, detail: str, status: int | None = None) -> ProviderError:
    return ProviderError(f"{provider}: unexpected response: {detail}", kind="bad_response", retryable=True,
                         status=status)


def missing_key(provider: str) -> ProviderError:
    return ProviderError(f"{provider}: no API key configured", kind="auth", retryable=False)


# Shared by the providers that speak plain JSON over httpx (OpenAI-compatible, Gemini).

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
    """POST `body` and return the JSON answer, or raise a classified ProviderError.

    `classify(status, body_json, text, headers)` may return a ProviderError for provider-specific
    cases; None falls back to classify_status.
    """
    try:
        response = client.post(url, json=body, headers=dict(headers))
    except httpx.TimeoutException as exc:
        raise timeout_error(provider, timeout, type(exc).__name__) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        # A wrong base_url in config: retrying cannot fix it.
        raise ProviderError(f"{provider}: bad base_url: {redact(str(exc), secret)}", kind="invalid_request",
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
