"""Spend and abuse limits per tenant and per API token, decided before a model is called.

    [limits]                      every tenant's default: requests_per_minute, tokens_per_day,
                                  cost_usd_per_month (0: no limit), and per_token (the same
                                  three, for each API token of the tenant on its own)
    [tenants.<t>.limits]          the keys it sets replace the default's for tenant <t>

What is counted (cardloop/store/limits.py reads it from the ledger, `llm_usage`, in the store, so
every API process and worker sees the same numbers): every provider call attempt of the
tenant, its cards' turns and summaries and the prompt gateway's calls alike; refused calls are
not counted. A call still running ("calling") counts its reservation, taken when it was
admitted: its prompt's tokens (counted by the caller) plus the request's max output tokens, and
their cost at the model's price. Once settled, a call counts what it really used instead (a
failed call usually nothing), so concurrent calls see each other's reservations and a row a dead
worker left "calling" keeps its reservation. Windows (UTC):

    requests_per_minute   attempts started in the last 60 s (sliding); a slot frees when the
                          oldest of them is 60 s old
    tokens_per_day        input + output + cache read + cache write tokens of calls started
                          since midnight UTC (reservations of running calls); resets at the
                          next midnight
    cost_usd_per_month    cost of calls started since the 1st of the month, 00:00 UTC
                          (reservations of running calls); resets on the 1st of the next month

A call is admitted while what is used and reserved is below each limit, so the last admitted
call may still end above a token or cost cap: by its own reservation, and by whatever it uses
beyond it (a prompt the caller counted low, cache writes priced above input, or a reply longer
than its max output tokens from a provider that ignores them; every call sends one, the
gateway the profile's when its caller set none). A call is never refused for what it would
reserve, only for what is already used and held: one call always fits below a cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cardloop.contracts.config import Config

LIMIT_NAMES = ("requests_per_minute", "tokens_per_day", "cost_usd_per_month")
MINUTE = timedelta(seconds=60)


@dataclass(frozen=True)
class Limits:
    """One set of limits; 0: no limit."""

    requests_per_minute: int = 0
    tokens_per_day: int = 0
    cost_usd_per_month: float = 0.0

    @property
    def active(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_day or self.cost_usd_per_month)

    def as_dict(self) -> dict[str, float | int | None]:
        """For answers: None where there is no limit."""
        return {name: (getattr(self, name) or None) for name in LIMIT_NAMES}


@dataclass(frozen=True)
class EffectiveLimits:
    """A tenant's limits as config gives them: the tenant's as a whole, and each token's."""

    tenant: Limits = Limits()
    token: Limits = Limits()

    @property
    def active(self) -> bool:
        return self.tenant.active or self.token.active


def limits_for(config: Config, tenant: str) -> EffectiveLimits:
    """[limits], with the keys [tenants.<tenant>.limits] sets in its place."""
    base = config.limits
    whole = base.model_dump(exclude={"per_token"})
    each = base.per_token.model_dump() if base.per_token is not None else {}
    own = (config.tenants or {}).get(tenant)
    if own is not None and own.limits is not None:
        whole.update({k: getattr(own.limits, k) for k in own.limits.model_fields_set if k != "per_token"})
        if own.limits.per_token is not None:
            each.update({k: getattr(own.limits.per_token, k) for k in own.limits.per_token.model_fields_set})
    return EffectiveLimits(tenant=Limits(**whole), token=Limits(**each))


@dataclass(frozen=True)
class Windows:
    now: datetime
    minute_start: datetime  # exclusive: a call started exactly 60 s ago no longer counts
    day_start: datetime
    day_end: datetime
    month_start: datetime
    month_end: datetime


def windows(now: datetime) -> Windows:
    now = now.astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return Windows(now=now, minute_start=now - MINUTE, day_start=day, day_end=day + timedelta(days=1),
                   month_start=month, month_end=next_month)


@dataclass(frozen=True)
class Reservation:
    """What an admitted call holds against the token and cost caps while it runs: its prompt's
    tokens plus its max output tokens, and their cost at the model's price (store/limits.py
    keeps it on the call's "calling" row, apart from its real usage)."""

    tokens: int = 0
    cost_usd: Decimal = Decimal(0)


NO_RESERVATION = Reservation()


@dataclass(frozen=True)
class LimitUsage:
    """What a tenant (or one token) used in each window."""

    requests_last_minute: int = 0
    tokens_today: int = 0
    cost_usd_this_month: Decimal = Decimal(0)
    refused_today: int = 0
    # The part of tokens_today / cost_usd_this_month that running calls reserve (not used yet).
    reserved_tokens_today: int = 0
    reserved_cost_usd_this_month: Decimal = Decimal(0)
    # When the oldest request that keeps the minute full turns 60 s old (set when it is full).
    minute_frees_at: datetime | None = None

    def as_dict(self) -> dict[str, object]:
        return {"requests_last_minute": self.requests_last_minute, "tokens_today": self.tokens_today,
                "cost_usd_this_month": float(self.cost_usd_this_month), "refused_today": self.refused_today,
                "reserved_tokens_today": self.reserved_tokens_today,
                "reserved_cost_usd_this_month": float(self.reserved_cost_usd_this_month)}


@dataclass(frozen=True)
class Refusal:
    """A call refused before it reached the model. `kind` "rate": wait `retry_after` and call
    again; "cap": nothing more until the day or month turns (a card's stage ends blocked)."""

    scope: Literal["tenant", "token"]
    limit: str
    used: float
    cap: float
    kind: Literal["rate", "cap"]
    resets_at: datetime
    retry_after: float
    message: str = field(default="")

    @property
    def retry_after_seconds(self) -> int:
        return max(1, math.ceil(self.retry_after))


def check(usage: LimitUsage, limits: Limits, w: Windows, *, tenant: str, token_id: str | None = None
          ) -> Refusal | None:
    """The first limit `usage` has reached, as a Refusal; None when a call may start."""
    who = f"tenant {tenant!r}" if token_id is None else f"API token {token_id} of tenant {tenant!r}"
    scope: Literal["tenant", "token"] = "tenant" if token_id is None else "token"
    rpm = limits.requests_per_minute
    if rpm and usage.requests_last_minute >= rpm:
        frees = usage.minute_frees_at or (w.now + MINUTE)
        wait = max((frees - w.now).total_seconds(), 0.001)
        return Refusal(scope, "requests_per_minute", usage.requests_last_minute, rpm, "rate", frees, wait,
                       f"{who} reached its limit of {rpm} model requests per minute "
                       f"({usage.requests_last_minute} in the last 60 s); retry in {math.ceil(wait)} s")
    if limits.tokens_per_day and usage.tokens_today >= limits.tokens_per_day:
        wait = (w.day_end - w.now).total_seconds()
        return Refusal(scope, "tokens_per_day", usage.tokens_today, limits.tokens_per_day, "cap", w.day_end, wait,
                       f"{who} reached its cap of {limits.tokens_per_day:,} model tokens per day "
                       f"({usage.tokens_today:,} used today, UTC); it resets at {w.day_end:%Y-%m-%d %H:%M} UTC")
    cap = limits.cost_usd_per_month
    if cap and usage.cost_usd_this_month >= Decimal(str(cap)):
        wait = (w.month_end - w.now).total_seconds()
        return Refusal(scope, "cost_usd_per_month", float(usage.cost_usd_this_month), cap, "cap", w.month_end, wait,
                       f"{who} reached its cost cap of {usd(cap)} per month "
                       f"({usd(usage.cost_usd_this_month)} spent this month, UTC); it resets at "
                       f"{w.month_end:%Y-%m-%d %H:%M} UTC")
    return None


def usd(amount: float | Decimal) -> str:
    """Cents, or every digit when cents would hide the amount ($0.000001 is not $0.00)."""
    exact = Decimal(str(amount))
    if exact == exact.quantize(Decimal("0.01")):
        return f"${exact:,.2f}"
    return f"${exact.normalize():f}"
