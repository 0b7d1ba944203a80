"""Spend limits counted from the ledger (store/limits.py), on SQLite and PostgreSQL: the windows,
per tenant and per API token, refused rows kept but never counted, and two processes racing for
the last slot."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from cardloop.contracts.limits import EffectiveLimits, Limits, Reservation
from cardloop.store import Store, UsageRecord
from cardloop.store import migrations as store_migrations
from cardloop.store.migrations import MIGRATIONS
from cardloop.store.schema import usage_hours
from tests.cardloop.store.store_kit import card

KEY = "acme/github/PAY-9"
GATEWAY = "acme/gateway/-"
NOW = datetime(2026, 3, 31, 23, 59, 30, tzinfo=UTC)


def call(n: int, at: datetime, *, card_key: str = KEY, token_id: str | None = None, **fields: Any) -> UsageRecord:
    return UsageRecord(call_key=f"call-{n}", card_key=card_key, tenant=card_key.split("/")[0], stage="coding",
                       model="claude", created_at=at, token_id=token_id, kept=False, **fields)


def settle(store: Store, record: UsageRecord, tokens: int, cost: str) -> None:
    store.settle_call(record.model_copy(update={"status": "done", "input_tokens": tokens, "output_tokens": 0,
                                                "cost_usd": Decimal(cost)}))


def test_requests_per_minute_slides_and_says_when_a_slot_frees(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    limits = EffectiveLimits(tenant=Limits(requests_per_minute=2))
    assert store.admit_call(call(1, NOW - timedelta(seconds=50)), limits) is None
    assert store.admit_call(call(2, NOW - timedelta(seconds=20)), limits) is None
    refused = store.admit_call(call(3, NOW), limits)
    assert refused is not None and (refused.limit, refused.kind, refused.scope) == ("requests_per_minute", "rate",
                                                                                     "tenant")
    assert abs(refused.retry_after - 10) < 0.01  # call 1 leaves the window 60 s after it started
    assert "2 model requests per minute" in refused.message and "'acme'" in refused.message
    # The refusal is in the card's ledger with its reason, and neither billed nor counted.
    rows = {r.call_key: r for r in store.ledger(KEY)}
    assert rows["call-3"].status == "refused" and rows["call-3"].note == refused.message
    assert store.usage_totals(KEY).total.calls == 2
    assert store.admit_call(call(4, NOW + timedelta(seconds=1)), limits) is not None  # still full
    assert store.admit_call(call(5, NOW + timedelta(seconds=11)), limits) is None  # call 1 has left
    whole, _ = store.limit_usage("acme", NOW + timedelta(seconds=11))
    assert whole.requests_last_minute == 2 and whole.refused_today == 2


def test_tokens_per_day_and_cost_per_month_reset_at_utc_midnight_and_the_first(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    limits = EffectiveLimits(tenant=Limits(tokens_per_day=1_000, cost_usd_per_month=1.0))
    yesterday = call(1, NOW - timedelta(days=1))
    assert store.admit_call(yesterday, limits) is None
    settle(store, yesterday, 5_000, "0.60")  # yesterday's tokens do not count today; its cost does
    first = call(2, NOW - timedelta(hours=1))
    assert store.admit_call(first, limits) is None
    settle(store, first, 1_000, "0.10")
    refused = store.admit_call(call(3, NOW), limits)
    assert refused is not None and (refused.limit, refused.kind) == ("tokens_per_day", "cap")
    assert refused.resets_at == datetime(2026, 4, 1, tzinfo=UTC) and refused.retry_after_seconds == 30
    whole, _ = store.limit_usage("acme", NOW)
    assert (whole.tokens_today, whole.cost_usd_this_month) == (1_000, Decimal("0.7"))
    # The cost cap: $0.70 of $0.50 spent this month; a running call ("calling") counts as a request.
    cost = EffectiveLimits(tenant=Limits(cost_usd_per_month=0.5))
    refused = store.admit_call(call(4, NOW), cost)
    assert refused is not None and refused.limit == "cost_usd_per_month"
    assert refused.resets_at == datetime(2026, 4, 1, tzinfo=UTC) and "$0.50 per month" in refused.message
    # On the 1st of the next month both windows start again.
    april = NOW + timedelta(seconds=31)
    assert store.admit_call(call(5, april), limits) is None and store.admit_call(call(6, april), cost) is None


def test_a_tokens_limit_counts_its_own_calls_and_the_tenant_counts_all(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    limits = EffectiveLimits(tenant=Limits(requests_per_minute=3), token=Limits(requests_per_minute=1))
    assert store.admit_call(call(1, NOW, card_key=GATEWAY, token_id="tok_a"), limits) is None
    refused = store.admit_call(call(2, NOW, card_key=GATEWAY, token_id="tok_a"), limits)
    assert refused is not None and refused.scope == "token" and "tok_a" in refused.message
    assert store.admit_call(call(3, NOW, card_key=GATEWAY, token_id="tok_b"), limits) is None
    assert store.admit_call(call(4, NOW), limits) is None  # a card's turn: the tenant's third
    refused = store.admit_call(call(5, NOW, card_key=GATEWAY, token_id="tok_c"), limits)
    assert refused is not None and refused.scope == "tenant"
    whole, tokens = store.limit_usage("acme", NOW)
    assert whole.requests_last_minute == 3
    assert {t: u.requests_last_minute for t, u in tokens.items()} == {"tok_a": 1, "tok_b": 1, "tok_c": 0}
    # Another tenant's calls are its own.
    assert store.admit_call(call(6, NOW, card_key="globex/gateway/-"), limits) is None


def test_no_limits_open_the_row_as_start_call_does(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    for n in range(5):
        assert store.admit_call(call(n, NOW), EffectiveLimits()) is None
    assert {r.status for r in store.ledger(KEY)} == {"calling"}


RACER = """
import sys
from datetime import UTC, datetime
from sqlalchemy import select

from decimal import Decimal

from cardloop.contracts.limits import EffectiveLimits, Limits, Reservation
from cardloop.store import Store, UsageRecord
from cardloop.store.schema import usage_hours
url, who, limit = sys.argv[1], sys.argv[2], sys.argv[3]
# Each call holds 100 tokens and $0.10 while it runs (none is settled): 10 fit under each cap.
limits = EffectiveLimits(tenant=Limits(**{limit: {"requests_per_minute": 10, "tokens_per_day": 1_000,
                                                  "cost_usd_per_month": 1.0}[limit]}))
reserve = Reservation(tokens=100, cost_usd=Decimal("0.10"))
admitted = 0
with Store.open(url) as store:
    for n in range(8):
        row = UsageRecord(call_key=f"{who}-{n}", card_key="acme/gateway/-", tenant="acme", stage="gateway",
                          model="m", created_at=datetime.now(UTC))
        admitted += store.admit_call(row, limits, reserve) is None
print(admitted)
"""


@pytest.mark.parametrize("limit", ["requests_per_minute", "tokens_per_day", "cost_usd_per_month"])
def test_processes_racing_for_the_last_slots_admit_exactly_the_limit(db_url: str, tmp_path: Path,
                                                                     limit: str) -> None:
    """Three processes open 8 calls each, none settled: the minute's slots, and the token and
    cost caps through the calls' reservations (before them, every call fit a cap)."""
    Store.open(db_url).close()  # migrated once, before the racers
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    racers = [subprocess.Popen([sys.executable, str(script), db_url, f"p{i}", limit], stdout=subprocess.PIPE,
                               text=True) for i in range(3)]
    admitted = [int(p.communicate(timeout=60)[0]) for p in racers]
    assert all(p.returncode == 0 for p in racers)
    assert sum(admitted) == 10  # 24 tries, 10 per minute, whatever the interleaving


def test_closed_hours_are_summed_once_and_the_windows_still_add_up(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    for n, at, tokens, cost, token_id in (
            (1, datetime(2026, 3, 30, 10, tzinfo=UTC), 1_000, "0.50", None),      # yesterday: month only
            (2, datetime(2026, 3, 31, 20, tzinfo=UTC), 200, "0.10", "tok_a"),     # today, a closed hour
            (3, datetime(2026, 3, 31, 23, 50, tzinfo=UTC), 30, "0.01", "tok_a"),  # today, live
            (4, datetime(2026, 2, 27, 10, tzinfo=UTC), 9_999, "9", None)):        # last month
        row = call(n, at, card_key=GATEWAY if token_id else KEY, token_id=token_id)
        store.start_call(row)
        settle(store, row, tokens, cost)
    before = store.limit_usage("acme", NOW)  # nothing summed yet: all from the ledger
    limits = EffectiveLimits(tenant=Limits(tokens_per_day=231), token=Limits(tokens_per_day=10_000))
    for n in range(3):  # the first check sums 20:00 and earlier hours, the next ones add nothing
        assert store.admit_call(call(10 + n, NOW, card_key=GATEWAY, token_id="tok_a"), limits) is None
    whole, tokens = store.limit_usage("acme", NOW)
    assert (whole.tokens_today, whole.cost_usd_this_month) == (230, Decimal("0.61")) == (
        before[0].tokens_today, before[0].cost_usd_this_month)
    assert (tokens["tok_a"].tokens_today, tokens["tok_a"].cost_usd_this_month) == (230, Decimal("0.11"))
    with store.engine.connect() as conn:  # the owner's view (no row-level security scope needed on SQLite)
        summed = conn.execute(select(usage_hours.c.scope, usage_hours.c.hour, usage_hours.c.tokens)).all()
    if store.engine.dialect.name == "sqlite":
        assert sorted((scope, hour.hour, tokens) for scope, hour, tokens in summed) == [
            ("", 10, 1_000), ("", 20, 200), ("tok_a", 20, 200), ("~", 22, 0)]
    late = call(20, NOW)  # a call that ran after the sums were made is counted live
    assert store.admit_call(late, limits) is None
    settle(store, late, 1, "0")
    refused = store.admit_call(call(21, NOW), limits)
    assert refused is not None and refused.limit == "tokens_per_day" and refused.used == 231


# -- reservations: what a running call holds against the token and cost caps --------------------

def hold(tokens: int, cost: str) -> Reservation:
    return Reservation(tokens=tokens, cost_usd=Decimal(cost))


@pytest.mark.parametrize(("limits", "limit"), [
    (EffectiveLimits(tenant=Limits(tokens_per_day=1_000)), "tokens_per_day"),
    (EffectiveLimits(tenant=Limits(cost_usd_per_month=1.0)), "cost_usd_per_month"),
    (EffectiveLimits(token=Limits(tokens_per_day=1_000)), "tokens_per_day"),  # a token's own cap too
])
def test_calls_still_running_hold_their_reservations_so_only_what_fits_is_admitted(
        store: Store, limits: EffectiveLimits, limit: str) -> None:
    """8 calls open at once, each reserving 405 tokens and $0.405: 3 fit below 1,000 tokens or
    $1 (0, 405, 810 held before each); the 4th sees 1,215 held. Before reservations a running
    call counted nothing and all 8 were admitted."""
    refusals = [store.admit_call(call(n, NOW, card_key=GATEWAY, token_id="tok_a"), limits, hold(405, "0.405"))
                for n in range(8)]
    assert [r is None for r in refusals] == [True] * 3 + [False] * 5
    assert {r.limit for r in refusals if r is not None} == {limit}
    first = refusals[3]
    assert first is not None and first.used == (1_215 if limit == "tokens_per_day" else 1.215)
    whole, tokens = store.limit_usage("acme", NOW)
    assert (whole.tokens_today, whole.cost_usd_this_month) == (1_215, Decimal("1.215"))
    assert (whole.reserved_tokens_today, whole.reserved_cost_usd_this_month) == (1_215, Decimal("1.215"))
    assert tokens["tok_a"].reserved_tokens_today == 1_215
    # Billing and the card's totals never see a reservation: running calls have no usage yet.
    assert store.usage_totals(GATEWAY).total.input_tokens == 0 and store.usage_totals(GATEWAY).total.cost_usd == 0


def test_a_settled_call_counts_what_it_used_instead_of_its_reservation(store: Store) -> None:
    limits = EffectiveLimits(tenant=Limits(tokens_per_day=1_000, cost_usd_per_month=1.0))
    running = call(1, NOW, card_key=GATEWAY)
    assert store.admit_call(running, limits, hold(1_000, "0.90")) is None
    assert store.admit_call(call(2, NOW, card_key=GATEWAY), limits, hold(1, "0")) is not None  # 1,000 held
    settle(store, running, 120, "0.12")  # the reply was shorter than its max_tokens
    whole, _ = store.limit_usage("acme", NOW)
    assert (whole.tokens_today, whole.cost_usd_this_month) == (120, Decimal("0.12"))
    assert (whole.reserved_tokens_today, whole.reserved_cost_usd_this_month) == (0, Decimal(0))
    assert store.admit_call(call(3, NOW, card_key=GATEWAY), limits, hold(900, "0.90")) is None
    # A settled call that used more than it reserved counts all of it.
    row = call(4, NOW - timedelta(seconds=5), card_key=GATEWAY)
    assert store.admit_call(row, EffectiveLimits(), hold(10, "0.01")) is None
    settle(store, row, 2_000, "0")
    refused = store.admit_call(call(5, NOW, card_key=GATEWAY), limits, hold(1, "0"))
    assert refused is not None and refused.used == 120 + 900 + 2_000


def test_a_failed_call_frees_its_reservation(store: Store) -> None:
    limits = EffectiveLimits(tenant=Limits(tokens_per_day=1_000))
    failing = call(1, NOW, card_key=GATEWAY)
    assert store.admit_call(failing, limits, hold(1_000, "1")) is None
    assert store.admit_call(call(2, NOW, card_key=GATEWAY), limits, hold(1, "0")) is not None
    store.settle_call(failing.model_copy(update={"status": "failed"}))  # an error answer: no usage
    assert store.limit_usage("acme", NOW)[0].tokens_today == 0
    assert store.admit_call(call(3, NOW, card_key=GATEWAY), limits, hold(1, "0")) is None


def test_a_call_a_dead_worker_left_calling_keeps_its_reservation_in_the_hourly_sums(store: Store) -> None:
    """A worker killed mid-call leaves its row "calling" (billed, usage unknown): it holds its
    reservation for the rest of the day, also once its hour is summed into usage_hours."""
    store.upsert_card(KEY, card(KEY))
    limits = EffectiveLimits(tenant=Limits(tokens_per_day=1_000, cost_usd_per_month=5.0))
    dead = call(1, datetime(2026, 3, 31, 20, tzinfo=UTC))
    assert store.admit_call(dead, limits, hold(600, "0.60")) is None
    done = call(2, datetime(2026, 3, 31, 20, 30, tzinfo=UTC))
    assert store.admit_call(done, limits, hold(600, "0.60")) is None
    settle(store, done, 300, "0.30")
    # The check at NOW sums 20:00 (closed) into usage_hours: 600 held + 300 used, below 1,000.
    assert store.admit_call(call(3, NOW), limits, hold(100, "0.10")) is None
    refused = store.admit_call(call(4, NOW), limits, hold(1, "0"))
    assert refused is not None and refused.limit == "tokens_per_day" and refused.used == 900 + 100
    whole, _ = store.limit_usage("acme", NOW)
    assert (whole.tokens_today, whole.cost_usd_this_month) == (1_000, Decimal("1.00"))
    with store.engine.connect() as conn:
        summed = {(row.scope, row.tokens, row.cost_nanousd) for row in conn.execute(select(usage_hours))
                  if row.scope != "~"}
    assert summed == {("", 900, 900_000_000)}


def test_migration_10_gives_the_ledger_rows_it_finds_no_reservation(db_url: str) -> None:
    old = Store(db_url)
    try:
        store_migrations.migrate(old._db, MIGRATIONS[:9])
        with old.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO llm_usage (call_key, card_key, tenant, stage, profile, provider, model, purpose, status, "
                "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanousd, created_at) "
                "VALUES ('old-call', :k, 'acme', 'gateway', 'p', 'anthropic', 'm', 'turn', 'calling', 0, 0, 0, 0, "
                "0, :at)"), {"k": GATEWAY, "at": NOW})
        assert store_migrations.migrate(old._db) == list(range(10, len(MIGRATIONS) + 1))
    finally:
        old.close()
    with Store.open(db_url) as reopened:
        whole, _ = reopened.limit_usage("acme", NOW)
        assert (whole.tokens_today, whole.reserved_tokens_today, whole.requests_last_minute) == (0, 0, 1)
