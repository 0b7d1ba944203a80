"""LLM usage: the ledger of provider calls, one row per call attempt, summed per card.

Every attempt that reaches the provider has a row: opened ("calling") before the request
leaves, settled ("done" with its usage, or "failed") when the answer comes back. So the
ledger counts what the provider bills, retries included; `kept` marks the call whose result
the card holds (the turn's own usage), which the stage's progress and the prompt view use."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from sqlalchemy import Connection, and_, case, func, or_, select

from cardloop.store import schema as s
from cardloop.store.base import StoreBase
from cardloop.store.values import TIMED_OUT, UsageRecord, UsageSum, UsageTotals

_NANO = Decimal("1e-9")
_SETTLED = ("retry", "kept", "status", "model", "input_tokens", "output_tokens", "cache_read_tokens",
            "cache_write_tokens", "cost_nanousd", "created_at", "note")


class UsageMixin(StoreBase):
    def record_usage(self, record: UsageRecord) -> bool:
        """Record one call attempt's usage once per (card, `call_key`, `attempt`); False when it was
        recorded before."""
        tenant = self._tenant(record.tenant)  # the record checks that it matches its card key
        with self._db.write(tenant) as conn:
            return self._insert_new(conn, s.llm_usage, usage_values(record))

    def start_call(self, record: UsageRecord) -> None:
        """Open the ledger row of a call attempt before the request leaves (status "calling")."""
        tenant = self._tenant(record.tenant)
        with self._db.write(tenant) as conn:
            self._insert_new(conn, s.llm_usage, usage_values(record.model_copy(update={"status": "calling"})))

    def settle_call(self, record: UsageRecord) -> None:
        """Write a call attempt's outcome and usage over its ledger row (created if missing)."""
        tenant = self._tenant(record.tenant)
        with self._db.write(tenant) as conn:
            self._upsert_usage(conn, record)

    def _upsert_usage(self, conn: Connection, record: UsageRecord) -> None:
        conn.execute(self._upsert(s.llm_usage, ("tenant", "card_key", "call_key", "attempt"), _SETTLED),
                     dict(usage_values(record)))

    def call_usage(self, card_key: str, call_key: str) -> UsageRecord | None:
        """The ledger row of the attempt whose result was kept for `call_key`, or None."""
        tenant = self._card_tenant(card_key)
        with self._db.read(tenant) as conn:
            return kept_usage(conn, card_key, tenant, call_key)

    def ledger(self, card_key: str) -> list[UsageRecord]:
        """Every call attempt of the card, in the order they were opened."""
        tenant = self._card_tenant(card_key)
        u = s.llm_usage.c
        query = (select(s.llm_usage).where(u.card_key == card_key, u.tenant == tenant)
                 .order_by(u.inserted_at, u.call_key, u.attempt))
        with self._db.read(tenant) as conn:
            return [usage_record(row._mapping) for row in conn.execute(query)]

    def kept_usage_under(self, card_key: str, prefix: str) -> UsageSum:
        """The kept calls whose key starts `prefix/` (a research workflow's, keyed by its id):
        what a run paid for, when the run that made them failed before it could say so."""
        tenant = self._card_tenant(card_key)
        u = s.llm_usage.c
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = select(*_sums()).where(u.card_key == card_key, u.tenant == tenant, u.kept.is_(True),
                                       u.status == "done", u.call_key.like(f"{escaped}/%", escape="\\"))
        with self._db.read(tenant) as conn:
            row = conn.execute(query).one()
        # No rows: SUM is NULL.
        return UsageSum() if not row.calls else _usage_sum(row._mapping)

    def usage_totals(self, card_key: str) -> UsageTotals:
        tenant = self._card_tenant(card_key)
        u = s.llm_usage.c
        own = and_(u.kept.is_(True), u.status == "done")
        query = (
            select(u.stage, own.label("own"), *_sums(),
                   func.sum(case((u.retry.is_(True), 1), else_=0)).label("retries"),
                   func.sum(case((or_(u.status == "calling", and_(u.status == "failed", u.note == TIMED_OUT)), 1),
                                 else_=0)).label("unknown"))
            # A call a spend limit refused never reached the provider: in the ledger, not in the bill.
            .where(u.card_key == card_key, u.tenant == tenant, u.status != "refused")
            .group_by(u.stage, own)
            .order_by(u.stage)
        )
        with self._db.read(tenant) as conn:
            rows = [(row.stage, bool(row.own), _usage_sum(row._mapping), int(row.retries), int(row.unknown))
                    for row in conn.execute(query)]
        by_stage: dict[str, UsageSum] = {}
        for stage, _, part, _, _ in rows:
            by_stage[stage] = _add(by_stage.get(stage, UsageSum()), part)
        return UsageTotals(
            card_key=card_key,
            total=_total(list(by_stage.values())),
            by_stage=by_stage,
            own=_total([part for _, is_own, part, _, _ in rows if is_own]),
            extra=_total([part for _, is_own, part, _, _ in rows if not is_own]),
            retries=sum(r for *_, r, _ in rows),
            unknown=sum(n for *_, n in rows),
        )


def kept_usage(conn: Connection, card_key: str, tenant: str, call_key: str) -> UsageRecord | None:
    """The ledger row of the attempt whose result was kept for `call_key`, or None."""
    u = s.llm_usage.c
    query = select(s.llm_usage).where(u.card_key == card_key, u.tenant == tenant, u.call_key == call_key,
                                      u.kept.is_(True), u.status == "done").order_by(u.attempt).limit(1)
    row = conn.execute(query).one_or_none()
    return None if row is None else usage_record(row._mapping)


def usage_values(record: UsageRecord) -> dict[str, Any]:
    values = record.model_dump(exclude={"cost_usd"})
    values["cost_nanousd"] = nanousd(record.cost_usd)
    return values


def nanousd(usd: Decimal) -> int:
    """Dollars as the ledger's integer billionths."""
    return int((usd / _NANO).to_integral_value(ROUND_HALF_EVEN))


def usage_record(row: Mapping[str, Any]) -> UsageRecord:
    fields = {k: row[k] for k in UsageRecord.model_fields if k != "cost_usd" and k in row}
    return UsageRecord(**fields, cost_usd=Decimal(int(row["cost_nanousd"])).scaleb(-9))


def _sums() -> list[Any]:
    u = s.llm_usage.c
    return [
        func.count().label("calls"),
        func.sum(u.input_tokens).label("input_tokens"),
        func.sum(u.output_tokens).label("output_tokens"),
        func.sum(u.cache_read_tokens).label("cache_read_tokens"),
        func.sum(u.cache_write_tokens).label("cache_write_tokens"),
        func.sum(u.cost_nanousd).label("cost_nanousd"),
    ]


def _add(a: UsageSum, b: UsageSum) -> UsageSum:
    return UsageSum(**{name: getattr(a, name) + getattr(b, name) for name in UsageSum.model_fields})


def _total(parts: list[UsageSum]) -> UsageSum:
    total = UsageSum()
    for part in parts:
        total = _add(total, part)
    return total


def _usage_sum(row: Mapping[str, Any]) -> UsageSum:
    # int(): PostgreSQL sums BIGINT as NUMERIC, which arrives as Decimal.
    return UsageSum(
        calls=int(row["calls"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        cache_read_tokens=int(row["cache_read_tokens"]),
        cache_write_tokens=int(row["cache_write_tokens"]),
        cost_usd=Decimal(int(row["cost_nanousd"])).scaleb(-9),
    )
