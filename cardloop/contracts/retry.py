"""How long a failing model call is retried, by what went wrong, and what the stage says meanwhile.

Two schedules, because the causes heal on different clocks:

- the model cannot be reached (connection refused, DNS, no answer in time): a short schedule
  counted in attempts. A wrong base_url or a missing network rarely heals in minutes, and the
  operator should hear about it soon.
- the provider is overloaded (529, 503), answers 5xx, or rate-limits: a longer schedule capped
  by a deadline in minutes. Overloads last minutes; failing every running stage after ~70 s
  (the old eight attempts) left cards failed after the provider had recovered.

`decide` is pure (no clock, no Temporal): the activity passes the attempt number and the time
since the call was first scheduled, and turns the Decision into its failure (activities/errors.py).
Every decision carries a sentence for operators: it is the activity failure's message, which
the Temporal UI and `cardloop card show` print while the call waits for its next attempt.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_seconds(value: object) -> object:
    """'90s', '10m', '1h30m', '250ms', a bare number (seconds) or '' / 'off' (0)."""
    if isinstance(value, bool) or not isinstance(value, str):
        return value
    text = value.strip().lower()
    if text in ("", "off", "0"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        pass
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{value!r} is not a duration: use e.g. 90s, 10m, 1h30m or a number of seconds")
    return sum(float(n) * _UNIT[u] for n, u in parts)


# Seconds, written in config.toml as a number or a duration string.
Seconds = Annotated[float, BeforeValidator(parse_seconds), Field(ge=0)]

# Provider error kinds (integrations/providers/base.py KINDS) per schedule.
UNREACHABLE_KINDS = frozenset({"connection", "timeout"})
OVERLOAD_KINDS = frozenset({"overloaded", "server", "rate_limited", "conflict", "bad_response"})

_SAYS = {
    "connection": "cannot reach the model",
    "timeout": "the model did not answer in time",
    "overloaded": "the model is overloaded",
    "server": "the model's server fails",
    "rate_limited": "the model's rate limit is reached",
    "conflict": "the model's server reports a conflict",
    "bad_response": "the model's answer was garbled",
}


class RetryConfig(BaseModel):
    """[retry] in config.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unreachable_initial: Seconds = 2.0
    unreachable_max_interval: Seconds = 30.0
    unreachable_attempts: int = Field(default=8, ge=1, le=1_000)
    overload_initial: Seconds = 5.0
    overload_max_interval: Seconds = 60.0
    overload_deadline: Seconds = 900.0
    # Failures that are neither (a bug, the store): attempts before the stage fails.
    other_attempts: int = Field(default=8, ge=1, le=1_000)
    # A stage that failed for a transient cause runs again after this long (0: never), at most
    # auto_retries times in a row. [stages.<stage>] auto_retry_after overrides the delay.
    auto_retry_after: Seconds = 0.0
    auto_retries: int = Field(default=3, ge=0, le=20)


@dataclass(frozen=True)
class Decision:
    """Retry after `delay` seconds, or give up (delay None). `message` says which, in words."""

    delay: float | None
    message: str


def words(seconds: float) -> str:
    """12 s, 4 min, 2 min 30 s, 1 h 5 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {sec} s" if sec else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def _backoff(initial: float, maximum: float, attempt: int) -> float:
    # attempt 1 failed: wait `initial`; each later failure doubles it, up to `maximum`.
    exponent = min(attempt - 1, 60)
    return min(initial * math.pow(2.0, exponent), maximum)


def decide(kind: str, attempt: int, elapsed: float, cfg: RetryConfig, *, retry_after: float | None = None,
           detail: str = "") -> Decision:
    """What to do after attempt `attempt` (1-based) failed with a retryable provider error of
    `kind`, `elapsed` seconds after the call was first scheduled."""
    says = _SAYS.get(kind, "the model call failed")
    tail = f": {detail}" if detail else ""
    if kind in UNREACHABLE_KINDS:
        of = cfg.unreachable_attempts
        if attempt >= of:
            return Decision(None, f"gave up: {says} (attempt {attempt} of {of}){tail}")
        delay = _backoff(cfg.unreachable_initial, cfg.unreachable_max_interval, attempt)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return Decision(delay, f"retrying: {says} (attempt {attempt} of {of}, next in {words(delay)}){tail}")
    deadline = cfg.overload_deadline
    delay = _backoff(cfg.overload_initial, cfg.overload_max_interval, attempt)
    if retry_after is not None:
        delay = retry_after  # the provider said when: neither sooner nor later helps
    if elapsed + delay > deadline:
        if retry_after is not None:  # the provider's own wait ends past the deadline: say so
            return Decision(None, f"gave up: {says} and the provider asks to wait {words(delay)}, past [retry] "
                                  f"overload_deadline of {words(deadline)} (attempt {attempt}, failing for "
                                  f"{words(elapsed)}){tail}")
        return Decision(None, f"gave up: {says} for {words(elapsed)} (attempt {attempt}; "
                              f"[retry] overload_deadline is {words(deadline)}){tail}")
    return Decision(delay, f"retrying: {says} (attempt {attempt}, for {words(elapsed)} so far, "
                           f"next in {words(delay)}, gives up after {words(deadline)}){tail}")

