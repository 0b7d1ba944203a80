"""The one upstream error and the one reading of a service's requested wait."""

from __future__ import annotations

import email.utils
import math
import pickle
import time

from cardloop.integrations.sources.github.errors import rate_limit_wait
from cardloop.integrations.upstream import MAX_RETRY_AFTER, UpstreamError, clamp_wait, retry_after_header


def test_retry_after_header_reads_milliseconds_seconds_and_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after_header({"Retry-After-Ms": "250", "Retry-After": "9"}, now=now) == 0.25
    assert retry_after_header({"retry-after-ms": "soon", "retry-after": "9"}, now=now) == 9.0  # garbled ms
    assert retry_after_header({"retry-after": email.utils.formatdate(now + 42, usegmt=True)}, now=now) == 42.0
    assert retry_after_header({"retry-after": "nan"}, now=now) is None
    assert retry_after_header(None) is None and retry_after_header({}) is None


def test_clamp_wait_caps_floors_and_drops_garbage() -> None:
    assert clamp_wait(3_600.0) == MAX_RETRY_AFTER
    assert clamp_wait(3_600.0, cap=900.0) == 900.0
    assert clamp_wait(-5.0) == 0.0 and clamp_wait(0.2, floor=1.0) == 1.0
    assert clamp_wait(None) is None and clamp_wait(math.inf) is None and clamp_wait(math.nan) is None


def test_github_rate_limit_reads_the_same_header_with_its_own_cap() -> None:
    # An HTTP date in Retry-After was ignored by GitHub's own parser before there was one.
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    wait = rate_limit_wait(429, {"Retry-After": when}, "slow down")
    assert wait is not None and 100 <= wait <= 121
    assert rate_limit_wait(403, {"retry-after": "7200"}, "rate limit") == 900.0
    assert rate_limit_wait(404, {"retry-after": "7"}, "not found") is None


def test_the_error_pickles_with_every_field() -> None:
    err = UpstreamError("github: HTTP 429", kind="rate_limited", retryable=True, status=429, retry_after=7.0)
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.kind, back.retryable, back.status, back.retry_after) == (
        "github: HTTP 429", "rate_limited", True, 429, 7.0)
    assert str(back) == "github: HTTP 429" and "rate_limited" in repr(back)
