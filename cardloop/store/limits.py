"""Spend and abuse limits counted from the ledger (cardloop/contracts/limits.py says what).

`admit_call` is the gate before a provider call: in ONE write transaction it counts what the
tenant (and the call's API token) used in each window and either opens the call's ledger row
("calling", as `start_call` does) or records a "refused" row with the reason, so concurrent
callers in other processes cannot both take the last slot: SQLite serializes write
transactions (BEGIN IMMEDIATE), PostgreSQL takes a transaction-scoped advisory lock per tenant.
The windows are read through the (tenant, created_at) and (tenant, token_id, created_at)
indexes of `llm_usage`; refused rows are never counted."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, case, func, select, text

from cardloop.contracts.limits import MINUTE, EffectiveLimits, LimitUsage, Refusal, Windows, check, windows
from cardloop.store import schema as s
from cardloop.store.usage import UsageMixin, usage_values
from cardloop.store.values import UsageRecord


class LimitsMixin(UsageMixin):
    def admit_call(self, record: UsageRecord, limits: EffectiveLimits) -> Refusal | None:
        """Open the call's ledger row ("calling") unless a limit refuses it; then the row is
        "refused" with the reason in `note` and the Refusal is returned."""
        tenant = self._tenant(record.tenant)
        w = windows(record.created_at)
        with self._db.write(tenant) as conn:
            refusal = None
            if limits.active:
                if self._db.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": "cardloop.limits/" + tenant})
                if limits.tenant.active:
                    refusal = check(_usage(conn, tenant, None, w, limits.tenant.requests_per_minute),
                                    limits.tenant, w, tenant=tenant)
                if refusal is None and record.token_id and limits.token.active:
                    refusal = check(_usage(conn, tenant, record.token_id, w, limits.token.requests_per_minute),
                                    limits.token, w, tenant=tenant, token_id=record.token_id)
            if refusal is not None:
                row = record.model_copy(update={"status": "refused", "note": refusal.message[:500]})
            else:
                row = record.model_copy(update={"status": "calling"})
            self._insert_new(conn, s.llm_usage, usage_values(row))
        return refusal

    def limit_usage(self, tenant: str, now: datetime) -> tuple[LimitUsage, dict[str, LimitUsage]]:
        """What `tenant` used in each window at `now`, as a whole and per API token (the tokens
        with calls this month)."""
        tenant = self._tenant(tenant)
        w = windows(now)
        with self._db.read(tenant) as conn:
            whole = _usage(conn, tenant, None, w, 0)
            u = s.llm_usage.c
            ids = conn.execute(select(u.token_id).distinct().where(
                u.tenant == tenant, u.token_id.is_not(None), u.created_at >= w.month_start)).scalars().all()
            tokens = {token_id: _usage(conn, tenant, token_id, w, 0) for token_id in sorted(ids)}
        return whole, tokens


def _usage(conn: Connection, tenant: str, token_id: str | None, w: Windows, rpm: int) -> LimitUsage:
    u = s.llm_usage.c
    scope: list[Any] = [u.tenant == tenant]
    if token_id is not None:
        scope.append(u.token_id == token_id)
    counted = u.status != "refused"
    since = min(w.month_start, w.minute_start)  # a minute that began last month still counts
    tokens = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    row = conn.execute(select(
        func.sum(case(((u.created_at > w.minute_start) & counted, 1), else_=0)).label("minute"),
        func.sum(case(((u.created_at >= w.day_start) & counted, tokens), else_=0)).label("tokens"),
        func.sum(case(((u.created_at >= w.month_start) & counted, u.cost_nanousd), else_=0)).label("cost"),
        func.sum(case(((u.created_at >= w.day_start) & (u.status == "refused"), 1), else_=0)).label("refused"),
    ).where(*scope, u.created_at >= since)).one()
    minute = int(row.minute or 0)
    frees = None
    if rpm and minute >= rpm:
        # The (minute - rpm + 1)-th oldest call of the window must leave it before one more fits.
        oldest: datetime | None = conn.execute(
            select(u.created_at).where(*scope, counted, u.created_at > w.minute_start)
            .order_by(u.created_at).offset(minute - rpm).limit(1)).scalar_one_or_none()
        frees = None if oldest is None else oldest + MINUTE
    # int(): PostgreSQL sums BIGINT as NUMERIC, which arrives as Decimal.
    return LimitUsage(requests_last_minute=minute, tokens_today=int(row.tokens or 0),
                      cost_usd_this_month=Decimal(int(row.cost or 0)).scaleb(-9), refused_today=int(row.refused or 0),
                      minute_frees_at=frees)
