"""The spend limits' check against opening the ledger row without one, measured in the same run.

Fills a SQLite store with N calls of one tenant (one every 20 s back from now: 100,000 is about
23 days) and prints the time of `admit_call` with all three limits on (after the first check,
which sums the closed hours once) against `start_call` (the same row, no check):

    first_check_ms   the first check: every closed hour of the month summed into usage_hours
    check_ratio      admit_call / start_call, steady state                      target <= 5

Run: .venv/bin/python bench/limits.py [--rows N] [--url sqlite:///...|postgresql://...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cardloop.contracts.limits import EffectiveLimits, Limits
from cardloop.store import Store, UsageRecord
from cardloop.store import schema as s
from cardloop.store.usage import usage_values


def row(key: str, at: datetime, **usage: object) -> UsageRecord:
    return UsageRecord(call_key=key, card_key="acme/gateway/-", tenant="acme", stage="gateway", model="m",
                       created_at=at, **usage)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--url", default="")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp()}/limits.sqlite"
    now = datetime.now(UTC)
    limits = EffectiveLimits(tenant=Limits(requests_per_minute=10**6, tokens_per_day=10**12,
                                           cost_usd_per_month=10.0**9))
    with Store.open(url) as store:
        filled = [usage_values(row(f"c{i}", now - timedelta(seconds=20 * i), input_tokens=100, output_tokens=10,
                                   cost_usd=Decimal("0.001"))) for i in range(args.rows)]
        with store._db.write("acme") as conn:
            conn.execute(s.llm_usage.insert(), filled)
        t = time.perf_counter()
        store.admit_call(row("first", now), limits)
        first = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(args.runs):
            store.admit_call(row(f"a{i}", now), limits)
        checked = (time.perf_counter() - t) / args.runs
        t = time.perf_counter()
        for i in range(args.runs):
            store.start_call(row(f"s{i}", now))
        bare = (time.perf_counter() - t) / args.runs
    print(f"rows                 {args.rows:,}")
    print(f"first_check_ms       {first * 1000:.0f}")
    print(f"admit_call_ms        {checked * 1000:.2f}")
    print(f"start_call_ms        {bare * 1000:.2f}")
    print(f"check_ratio          {checked / bare:.2f}   (target <= 5)")


if __name__ == "__main__":
    main()
