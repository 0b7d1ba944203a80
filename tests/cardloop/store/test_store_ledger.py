"""The ledger of provider calls (one row per attempt) and side effects recorded with their
call's usage, on SQLite and PostgreSQL; the store under a real SQLite lock."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from cardloop.prompts.card import Message
from cardloop.store import MIGRATIONS, Store, StoreError, StoreUnavailable, UsageRecord
from cardloop.store import migrations as store_migrations
from tests.cardloop.store.store_kit import card

KEY = "acme/github/PAY-142"

CALL = "card/acme/github/PAY-142/1-coding/turn-1"


def attempt(n: int, cost: str, **fields: Any) -> UsageRecord:
    return UsageRecord(call_key=CALL, attempt=n, retry=n > 1, kept=False, card_key=KEY, tenant="acme",
                       stage="coding", model="claude", input_tokens=100 * n, output_tokens=10 * n,
                       cost_usd=Decimal(cost), created_at=datetime.now(UTC), **fields)


def reply(content: str) -> Message:
    return Message(role="assistant", content=content, created_at=datetime.now(UTC))


def test_a_late_reply_is_billed_as_a_retry_and_the_first_stored_one_stays(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    store.start_call(attempt(1, "0"))
    store.start_call(attempt(2, "0"))
    # Attempt 2 (a new worker) stores its reply first; attempt 1, a zombie whose call came back
    # late, is billed but its reply is not kept.
    seq = store.record_reply(KEY, reply("reply of attempt 2"), dedup_key=CALL, stage="coding",
                             usage=attempt(2, "0.02"))
    assert store.record_reply(KEY, reply("reply of attempt 1"), dedup_key=CALL, stage="coding",
                              usage=attempt(1, "0.01")) == seq
    stored = store.stored_reply(KEY, CALL)
    assert stored is not None and stored.seq == seq
    assert stored.message.content == "reply of attempt 2"
    assert stored.usage is not None and (stored.usage.attempt, stored.usage.input_tokens) == (2, 200)
    rows = {r.attempt: r for r in store.ledger(KEY)}
    assert (rows[1].kept, rows[1].retry, rows[1].status) == (False, True, "done")
    assert (rows[2].kept, rows[2].retry, rows[2].status) == (True, True, "done")
    totals = store.usage_totals(KEY)
    assert totals.total.calls == 2 and totals.total.cost_usd == Decimal("0.03")
    assert totals.own.calls == 1 and totals.own.cost_usd == Decimal("0.02")
    assert totals.extra.cost_usd == Decimal("0.01") and totals.retries == 2 and totals.unknown == 0
    assert [m.content for m in store.messages(KEY) if m.role == "assistant"][-1] == "reply of attempt 2"
    assert store.stored_reply(KEY, "no-such-call") is None


def test_the_same_record_written_again_keeps_its_call_kept(store: Store) -> None:
    """An activity waits out an unavailable store by trying a call again (activities/heartbeat.py):
    a write that committed but whose answer the connection lost is written a second time. The
    call whose reply was stored is not a retry of itself; another attempt's late reply still is."""
    store.upsert_card(KEY, card(KEY))
    store.start_call(attempt(1, "0"))
    for _ in range(2):
        store.record_reply(KEY, reply("reply of attempt 1"), dedup_key=CALL, stage="coding", usage=attempt(1, "0.01"))
    store.record_reply(KEY, reply("late reply of attempt 2"), dedup_key=CALL, stage="coding", usage=attempt(2, "0.02"))
    rows = {r.attempt: r for r in store.ledger(KEY)}
    assert (rows[1].kept, rows[1].retry, rows[1].status) == (True, False, "done")
    assert (rows[2].kept, rows[2].retry) == (False, True)
    stored = store.stored_reply(KEY, CALL)
    assert stored is not None and stored.usage is not None and stored.usage.attempt == 1
    assert store.usage_totals(KEY).own.cost_usd == Decimal("0.01")
    effect = {"call_key": "chunk/d0c1"}
    for _ in range(2):
        store.record_effect(KEY, "chunk/d0c1", "summary", "s", attempt(1, "0.01").model_copy(update=effect))
    found = store.effect(KEY, "chunk/d0c1")
    assert found is not None and found.usage is not None and found.usage.attempt == 1 and found.usage.kept


def test_a_call_lost_with_its_worker_stays_in_the_ledger_without_usage(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    store.start_call(attempt(1, "0"))  # the worker died mid-call: never settled
    store.start_call(attempt(1, "0"))  # a re-run of the same attempt opens nothing new
    store.start_call(attempt(2, "0"))
    store.settle_call(attempt(2, "0").model_copy(update={"status": "failed"}))  # a 529
    store.record_reply(KEY, reply("ok"), dedup_key=CALL, stage="coding", usage=attempt(3, "0.05"))
    totals = store.usage_totals(KEY)
    assert totals.total.calls == 3 and totals.unknown == 1
    assert totals.own.calls == 1 and totals.extra.calls == 2
    assert [(r.attempt, r.status) for r in sorted(store.ledger(KEY), key=lambda r: r.attempt)] == [
        (1, "calling"), (2, "failed"), (3, "done")]


def test_an_effect_is_recorded_once_with_its_calls_usage(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    assert store.effect(KEY, "chunk/d0c0") is None
    chunk = {"call_key": "chunk/d0c0"}
    assert store.record_effect(KEY, "chunk/d0c0", "summary", "first", attempt(1, "0.01").model_copy(update=chunk))
    assert not store.record_effect(KEY, "chunk/d0c0", "summary", "second",
                                   attempt(2, "0.02").model_copy(update=chunk))
    found = store.effect(KEY, "chunk/d0c0")
    assert found is not None and found.result == "first"
    assert found.usage is not None and found.usage.attempt == 1
    assert store.usage_totals(KEY).total.cost_usd == Decimal("0.03")
    with pytest.raises(StoreError, match="effect key"):
        store.record_effect(KEY, "", "summary", "x")


def test_migration_5_keeps_the_rows_of_version_3_as_first_attempts(db_url: str) -> None:
    old = Store(db_url)
    try:
        store_migrations.migrate(old._db, MIGRATIONS[:3])
        with old.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO llm_usage (call_key, card_key, tenant, stage, profile, provider, model, purpose, "
                "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanousd, created_at) "
                "VALUES ('old-call', :k, 'acme', 'coding', 'p', 'anthropic', 'm', 'turn', 7, 3, 0, 0, 5000, "
                ":at)"), {"k": KEY, "at": datetime.now(UTC)})
        # keys scoped by tenant, the ledger, limits (and every later migration)
        assert store_migrations.migrate(old._db) == list(range(4, len(MIGRATIONS) + 1))
    finally:
        old.close()
    with Store.open(db_url) as reopened:
        (row,) = reopened.ledger(KEY)
        assert (row.call_key, row.attempt, row.kept, row.retry, row.status) == ("old-call", 1, True, False, "done")
        assert row.cost_usd == Decimal("0.000005")
        # The new key lets a second attempt of the same call in.
        assert reopened.record_usage(row.model_copy(update={"attempt": 2, "retry": True, "kept": False}))
        assert not reopened.record_usage(row.model_copy(update={"attempt": 2}))
        assert reopened.usage_totals(KEY).total.calls == 2


def test_a_locked_sqlite_store_is_a_typed_error_after_its_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store.open(f"sqlite:///{path}?busy_timeout_ms=300") as locked:
        locked.upsert_card(KEY, card(KEY))
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            with pytest.raises(StoreUnavailable, match=r"^store unavailable: database is locked$"):
                locked.append_message(KEY, reply("waits"), dedup_key="d1")
            assert locked.get_card(KEY) is not None  # readers are not blocked (WAL)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert locked.append_message(KEY, reply("lands"), dedup_key="d1") == 0


def test_a_bad_busy_timeout_in_the_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="busy_timeout_ms='soon'"):
        Store.open(f"sqlite:///{tmp_path}/s.sqlite?busy_timeout_ms=soon")


def test_effect_results_are_a_cards_results_of_one_kind_oldest_first(store: Store) -> None:
    other = KEY.rsplit("/", 1)[0] + "/OTHER-1"
    assert store.effect_results(KEY, "board_move_at") == []
    for i in range(3):
        store.record_effect(KEY, f"board_move_at/k{i}", "board_move_at", f"r{i}")
    store.record_effect(KEY, "board_move_at/k0", "board_move_at", "again")   # the first one stays
    store.record_effect(KEY, "board_move/x", "board_move", "another kind")
    store.record_effect(other, "board_move_at/k9", "board_move_at", "another card")
    assert store.effect_results(KEY, "board_move_at") == ["r0", "r1", "r2"]


def test_kept_usage_under_a_key_counts_that_runs_kept_calls_only(store: Store) -> None:
    # A research workflow's calls are keyed `<its id>/...`; the agent's research tool's run is a
    # sibling whose id starts the same (`.../research-2-toolu_1`), and `_` must not be a wildcard.
    store.upsert_card(KEY, card(KEY))
    run = "card/acme/github/PAY-142/1-error_fixing/research"

    def row(key: str, n: int, cost: str, kept: bool = False) -> UsageRecord:
        return attempt(n, cost).model_copy(update={"call_key": key, "status": "done", "kept": kept})

    store.settle_call(row(f"{run}/plan", 1, "0.01", kept=True))
    store.settle_call(row(f"{run}/batch-0/a1", 1, "0.02", kept=True))
    store.settle_call(row(f"{run}/batch-1/a1", 1, "0.04"))  # cancelled mid-call: billed, not kept
    store.settle_call(row(f"{run}-2-toolu_1/plan", 1, "0.08", kept=True))
    store.settle_call(row(run.replace("_", "x") + "/plan", 1, "0.16", kept=True))
    paid = store.kept_usage_under(KEY, run)
    assert (paid.calls, paid.cost_usd, paid.input_tokens, paid.output_tokens) == (2, Decimal("0.03"), 200, 20)
    assert store.kept_usage_under(KEY, f"{run}/nothing").calls == 0
