"""GitHub's error answers as UpstreamErrors: rate limits (403/429 with x-ratelimit-* or
retry-after) are retryable after the reset (retry_after; the message names the wait, never a
retry, which is the caller's to make); 401/403/404/410 and other 4xx are final; 5xx retry."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from cardloop.integrations.upstream import UpstreamError, clamp_wait, lower_keys, retry_after_header

# GitHub's primary rate limit resets hourly: waited for in 15-minute steps, past the usual cap.
MAX_RETRY_AFTER = 900.0
SECONDARY_RATE_LIMIT_WAIT = 60.0  # GitHub: "wait at least one minute" when it names no time


def rate_limit_wait(status: int, headers: Mapping[str, Any], message: str) -> float | None:
    """Seconds to wait when this answer is a rate limit, else None."""
    if status not in (403, 429):
        return None
    lowered = lower_keys(headers)
    asked = retry_after_header(lowered)
    if asked is not None:
        return clamp_wait(asked, cap=MAX_RETRY_AFTER, floor=1.0)
    if lowered.get("x-ratelimit-remaining") == "0" and lowered.get("x-ratelimit-reset"):
        try:
            reset = float(lowered["x-ratelimit-reset"])
        except ValueError:
            return SECONDARY_RATE_LIMIT_WAIT
        return clamp_wait(math.ceil(reset - time.time()), cap=MAX_RETRY_AFTER, floor=1.0)
    if "rate limit" in message.lower() or status == 429:
        return SECONDARY_RATE_LIMIT_WAIT
    return None


def classify_status(status: int, headers: Mapping[str, Any], message: str, doing: str) -> UpstreamError:
    """A GitHub error answer as an UpstreamError: whether retrying can help, and the reason."""
    detail = f"HTTP {status}" + (f": {message}" if message else "")

    def final(kind: str, text: str) -> UpstreamError:
        return UpstreamError(text, kind=kind, retryable=False, status=status)

    wait = rate_limit_wait(status, headers, message)
    if wait is not None:
        # The wait GitHub asks for, not a promise of a retry: `cardloop context` runs a source once,
        # and the activity's last attempt retries nothing. Whoever retries reads retry_after.
        return UpstreamError(f"GitHub rate limit reached while {doing} ({detail}); GitHub asks to wait "
                             f"{wait:.0f} s",
                             kind="rate_limited", retryable=True, status=status, retry_after=wait)
    if status == 401:
        return final("auth", f"GitHub rejected the credentials while {doing} ({detail}): check the token, or "
                             "the App id, private key and installation id")
    if status == 403:
        return final("auth", f"GitHub refused access while {doing} ({detail}): the token or App installation "
                             "lacks a permission (actions, checks, pull requests: read)")
    if status == 404:
        return final("not_found", f"not found while {doing} ({detail}): it does not exist or these credentials "
                                  "cannot see it")
    if status == 410:
        return final("not_found", f"gone while {doing} ({detail}): expired or deleted")
    if status in (408, 409) or status >= 500:
        kind = {408: "timeout", 409: "conflict"}.get(status, "server")
        return UpstreamError(f"GitHub failed while {doing} ({detail})", kind=kind, retryable=True, status=status)
    return final("invalid_request", f"GitHub refused the request while {doing} ({detail})")


def error_message(data: Any) -> str:
    """GitHub's own message in an error body."""
    if isinstance(data, dict):
        msg = data.get("message")
        if isinstance(msg, str):
            return msg[:300]
        errors = data.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("message", ""))[:300]
    return ""
