"""LLM usage: tokens and cost per model call, recorded once per call key, summed per card."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from sqlalchemy import func, select

from cardloop.store import schema as s
from cardloop.store.base import StoreBase
from cardloop.store.values import UsageRecord, UsageSum, UsageTotals

_NANO = Decimal("1e-9")


class UsageMixin(StoreBase):
    def record_usage(self, record: UsageRecord) -> bool:
        """Record one call's usage once per `call_key`; False when it was recorded before."""
        tenant = self._tenant(record.tenant)  # the record checks that it matches its card key
        values = record.model_dump(exclude={"cost_usd"})
        values["cost_nanousd"] = int((record.cost_usd / _NANO).to_integral_value(ROUND_HALF_EVEN))
        with self._db.write(tenant) as conn:
            return self._insert_new(conn, s.llm_usage, values)

    def usage_totals(self, card_key: str) -> UsageTotals:
        tenant = self._card_tenant(card_key)
        u = s.llm_usage.c
        sums = [
            func.count().label("calls"),
            func.sum(u.input_tokens).label("input_tokens"),
            func.sum(u.output_tokens).label("output_tokens"),
            func.sum(u.cache_read_tokens).label("cache_read_tokens"),
            func.sum(u.cache_write_tokens).label("cache_write_tokens"),
            func.sum(u.cost_nanousd).label("cost_nanousd"),
        ]
        query = (
            select(u.stage, *sums)
            .where(u.card_key == card_key, u.tenant == tenant)
            .group_by(u.stage)
            .order_by(u.stage)
        )
        with self._db.read(tenant) as conn:
            by_stage = {row.stage: _usage_sum(row._mapping) for row in conn.execute(query)}
        total = UsageSum(
            calls=sum(x.calls for x in by_stage.values()),
            input_tokens=sum(x.input_tokens for x in by_stage.values()),
            output_tokens=sum(x.output_tokens for x in by_stage.values()),
            cache_read_tokens=sum(x.cache_read_tokens for x in by_stage.values()),
            cache_write_tokens=sum(x.cache_write_tokens for x in by_stage.values()),
            cost_usd=sum((x.cost_usd for x in by_stage.values()), Decimal(0)),
        )
        return UsageTotals(card_key=card_key, total=total, by_stage=by_stage)


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
