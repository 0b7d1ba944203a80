"""Spend and abuse limits counted from the ledger (cardloop/contracts/limits.py says what).

`admit_call` is the gate before a provider call: in ONE write transaction it counts what the
tenant (and the call's API token) used in each window and either opens the call's ledger row
("calling", as `start_call` does, with the call's reservation in `reserved_tokens` and
`reserved_nanousd`) or records a "refused" row with the reason, so concurrent callers in other
processes cannot both take the last slot: SQLite serializes write transactions (BEGIN
IMMEDIATE), PostgreSQL takes a transaction-scoped advisory lock per tenant. Refused rows are
never counted; a "calling" row counts its reservation, any other its usage (`_counted`).

Fast with a month of calls: the minute window reads `llm_usage` through its (tenant, created_at)
and (tenant, token_id, created_at) indexes; the day and month windows add the hourly sums in
`usage_hours` for closed hours to a live read of the rest. An hour is closed (summed once, under
the same lock) when it ended more than `SETTLE_MARGIN` ago: a call still "calling" then (a reply
arriving over an hour late, or a worker that died mid-call) stays in the caps' sums with its
reservation, not with the usage settled later.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, case, func, select, text, update

from cardloop.contracts.limits import (
    MINUTE,
    NO_RESERVATION,
    EffectiveLimits,
    LimitUsage,
    Refusal,
    Reservation,
    Windows,
    check,
    windows,
)
from cardloop.store import schema as s
from cardloop.store.usage import UsageMixin, nanousd, usage_values
from cardloop.store.values import UsageRecord

SETTLE_MARGIN = timedelta(hours=1)
TENANT_SCOPE = ""  # usage_hours.scope of the tenant's own sums; a token's sums use its id
MARK = "~"  # usage_hours.scope of the row whose `hour` says up to where the sums go


class LimitsMixin(UsageMixin):
    def admit_call(self, record: UsageRecord, limits: EffectiveLimits,
                   reserve: Reservation = NO_RESERVATION) -> Refusal | None:
        """Open the call's ledger row ("calling", holding `reserve` against the token and cost
        caps until it is settled) unless a limit refuses it; then the row is "refused" with the
        reason in `note` and the Refusal is returned."""
        tenant = self._tenant(record.tenant)
        w = windows(record.created_at)
        with self._db.write(tenant) as conn:
            refusal = None
            if limits.active:
                if self._db.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": "cardloop.limits/" + tenant})
                rolled = _roll_up(conn, tenant, w)
                if limits.tenant.active:
                    usage = _usage(conn, tenant, None, w, rolled, limits.tenant.requests_per_minute)
                    refusal = check(usage, limits.tenant, w, tenant=tenant)
                if refusal is None and record.token_id and limits.token.active:
                    usage = _usage(conn, tenant, record.token_id, w, rolled, limits.token.requests_per_minute)
                    refusal = check(usage, limits.token, w, tenant=tenant, token_id=record.token_id)
            if refusal is not None:
                values = usage_values(record.model_copy(update={"status": "refused", "note": refusal.message[:500]}))
            else:
                values = {**usage_values(record.model_copy(update={"status": "calling"})),
                          "reserved_tokens": reserve.tokens, "reserved_nanousd": nanousd(reserve.cost_usd)}
            self._insert_new(conn, s.llm_usage, values)
        return refusal

    def limit_usage(self, tenant: str, now: datetime) -> tuple[LimitUsage, dict[str, LimitUsage]]:
        """What `tenant` used in each window at `now`, as a whole and per API token (the tokens
        with calls this month)."""
        tenant = self._tenant(tenant)
        w = windows(now)
        with self._db.read(tenant) as conn:
            rolled = _rolled_until(conn, tenant, w)
            whole = _usage(conn, tenant, None, w, rolled, 0, refusals=True)
            u = s.llm_usage.c
            ids = conn.execute(select(u.token_id).distinct().where(
                u.tenant == tenant, u.token_id.is_not(None), u.created_at >= w.month_start)).scalars().all()
            tokens = {token_id: _usage(conn, tenant, token_id, w, rolled, 0, refusals=True)
                      for token_id in sorted(ids)}
        return whole, tokens


def _floor_hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _rolled_until(conn: Connection, tenant: str, w: Windows) -> datetime:
    """Up to where `usage_hours` holds this month's sums (the month's start: nothing summed)."""
    h = s.usage_hours.c
    mark = conn.execute(select(h.hour).where(h.tenant == tenant, h.scope == MARK)).scalar_one_or_none()
    return w.month_start if mark is None or mark < w.month_start else mark


def _roll_up(conn: Connection, tenant: str, w: Windows) -> datetime:
    """Sum the closed hours not summed yet (inside the caller's locked write); returns the mark."""
    start = _rolled_until(conn, tenant, w)
    end = _floor_hour(w.now - SETTLE_MARGIN)
    if start >= end:
        return start
    u, h = s.llm_usage.c, s.usage_hours.c
    rows = conn.execute(select(u.token_id, u.created_at, _COUNTED_TOKENS.label("tokens"),
                               _COUNTED_COST.label("cost_nanousd")).where(
        u.tenant == tenant, u.created_at >= start, u.created_at < end, u.status != "refused"))
    sums: dict[tuple[str, datetime], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        for scope in (TENANT_SCOPE, row.token_id) if row.token_id else (TENANT_SCOPE,):
            total = sums[(scope, _floor_hour(row.created_at))]
            total[0] += int(row.tokens)
            total[1] += int(row.cost_nanousd)
    if sums:
        conn.execute(s.usage_hours.insert(), [
            {"tenant": tenant, "scope": scope, "hour": hour, "tokens": tokens, "cost_nanousd": cost}
            for (scope, hour), (tokens, cost) in sums.items()])
    marked = conn.execute(update(s.usage_hours).where(h.tenant == tenant, h.scope == MARK).values(hour=end))
    if marked.rowcount == 0:
        conn.execute(s.usage_hours.insert().values(tenant=tenant, scope=MARK, hour=end, tokens=0, cost_nanousd=0))
    return end


def _counted() -> tuple[Any, Any]:
    """A row's tokens and cost against the caps: its reservation while it runs ("calling"),
    then what it used. Built once: building expressions is most of a check's Python time."""
    u = s.llm_usage.c
    used = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    running = u.status == "calling"
    return case((running, u.reserved_tokens), else_=used), case((running, u.reserved_nanousd), else_=u.cost_nanousd)


_COUNTED_TOKENS, _COUNTED_COST = _counted()


def _usage(conn: Connection, tenant: str, token_id: str | None, w: Windows, rolled: datetime, rpm: int, *,
           refusals: bool = False) -> LimitUsage:
    u, h = s.llm_usage.c, s.usage_hours.c
    scope: list[Any] = [u.tenant == tenant]
    if token_id is not None:
        scope.append(u.token_id == token_id)
    counted = u.status != "refused"
    # Closed hours from their sums; the rest from the ledger itself.
    summed = conn.execute(select(
        func.sum(case((h.hour >= w.day_start, h.tokens), else_=0)).label("tokens"),
        func.sum(h.cost_nanousd).label("cost"),
    ).where(h.tenant == tenant, h.scope == (token_id or TENANT_SCOPE), h.hour >= w.month_start,
            h.hour < rolled)).one()
    live_day = max(w.day_start, rolled)
    row = conn.execute(select(
        func.sum(case(((u.created_at > w.minute_start) & counted, 1), else_=0)).label("minute"),
        func.sum(case(((u.created_at >= live_day) & counted, _COUNTED_TOKENS), else_=0)).label("tokens"),
        func.sum(case(((u.created_at >= rolled) & counted, _COUNTED_COST), else_=0)).label("cost"),
    ).where(*scope, u.created_at >= min(rolled, w.minute_start))).one()
    refused, reserved_tokens, reserved_cost = 0, 0, 0
    if refusals:  # the usage views, not the check
        refused = int(conn.execute(select(func.count()).where(
            *scope, u.created_at >= w.day_start, u.status == "refused").select_from(s.llm_usage)).scalar_one())
        # The reservations of running calls among the live rows (closed hours' sums do not tell).
        reserved = conn.execute(select(
            func.sum(case((u.created_at >= live_day, u.reserved_tokens), else_=0)).label("tokens"),
            func.sum(u.reserved_nanousd).label("cost"),
        ).where(*scope, u.created_at >= rolled, u.status == "calling")).one()
        reserved_tokens, reserved_cost = int(reserved.tokens or 0), int(reserved.cost or 0)
    minute = int(row.minute or 0)
    frees = None
    if rpm and minute >= rpm:
        # The (minute - rpm + 1)-th oldest call of the window must leave it before one more fits.
        oldest: datetime | None = conn.execute(
            select(u.created_at).where(*scope, counted, u.created_at > w.minute_start)
            .order_by(u.created_at).offset(minute - rpm).limit(1)).scalar_one_or_none()
        frees = None if oldest is None else oldest + MINUTE
    # int(): PostgreSQL sums BIGINT as NUMERIC, which arrives as Decimal.
    return LimitUsage(requests_last_minute=minute, tokens_today=int(row.tokens or 0) + int(summed.tokens or 0),
                      cost_usd_this_month=Decimal(int(row.cost or 0) + int(summed.cost or 0)).scaleb(-9),
                      refused_today=refused, reserved_tokens_today=reserved_tokens,
                      reserved_cost_usd_this_month=Decimal(reserved_cost).scaleb(-9),
                      minute_frees_at=frees)
