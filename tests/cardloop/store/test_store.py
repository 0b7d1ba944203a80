"""The store against a real SQLite file and the machine's real PostgreSQL.

Every test runs on both databases. On PostgreSQL each test gets a fresh schema (search_path set
through the connection options) that is dropped afterwards. An unreachable PostgreSQL skips
those tests locally and fails them in CI (CI=true), where the database must really be tested.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from pydantic import ValidationError
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import make_url

from cardloop.contracts.errors import CardloopError
from cardloop.prompts.card import Card, ChecklistItem, ContextItem, ContextKind, Message, TenantPrompt, ToolCall
from cardloop.prompts.stages import Stage
from cardloop.store import (
    MIGRATIONS,
    Migration,
    NotFoundError,
    Store,
    StoreError,
    TenantScopeError,
    UsageRecord,
    blob_ref,
    card_key_for,
)
from cardloop.store import migrations as store_migrations
from cardloop.store import schema as store_schema

KEY = "acme/github/PAY-142"
T = TypeVar("T")


def run_threads(count: int, fn: Callable[[int], T]) -> list[T]:
    """Run fn(0..count-1) on `count` threads released together; re-raise the first error."""
    barrier = threading.Barrier(count)

    def start(i: int) -> T:
        barrier.wait(timeout=30)
        return fn(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return [f.result() for f in [pool.submit(start, i) for i in range(count)]]


def user(content: str, **kw: Any) -> Message:
    return Message(role="user", content=content, **kw)


def example_card() -> Card:
    call = ToolCall(id="call_1", name="run_tests", input={"path": "tests/"})
    return Card(
        id="PAY-142",
        tenant="acme",
        board="github",
        title="Refund rounding",
        body="Refunds of 0.005 round the wrong way.",
        url="https://github.com/acme/pay/issues/142",
        repo="acme/pay",
        branch="fix/refund-rounding",
        stage=Stage.CODING,
        notes="Use Decimal.",
        checklist=(ChecklistItem(text="reproduce", done=True), ChecklistItem(text="fix")),
        tenant_prompt=TenantPrompt(custom_system_prompt="Be brief.", tone_profile={"style": "terse"}),
        history=(
            user("Please fix the rounding.", author="dana", created_at=datetime(2025, 3, 1, 9, 30, tzinfo=UTC)),
            Message(
                role="assistant",
                content="Running the tests first.",
                tool_calls=(call,),
                created_at=datetime(2025, 3, 1, 11, 31, tzinfo=timezone(timedelta(hours=2))),
            ),
            Message(role="tool", content="1 failed\x00 (NUL kept)", tool_call_id="call_1"),
            Message(role="assistant", content="Fixed: ünïcödé ✓ <promise>COMPLETE</promise>", id="m-4"),
        ),
        context=(
            ContextItem(kind=ContextKind.BUILD_LOG, source="actions/run/77", content="E   assert 1 == 2\n\x00"),
            ContextItem(kind=ContextKind.SOURCE_FILE, source="pay/refund.py", content="def refund(): ...", title="r"),
        ),
    )


def store_full_card(store: Store, card: Card, key: str = KEY) -> None:
    store.upsert_card(key, card)
    for i, message in enumerate(card.history):
        store.append_message(key, message, dedup_key=f"import/{i}", stage="coding")
    store.put_context_items(key, card.context)


# -- URLs, opening, migrations -------------------------------------------------------------------


def test_unknown_url_scheme_is_refused_without_printing_the_password() -> None:
    with pytest.raises(StoreError, match=r"unsupported store URL scheme 'mysql'.*expected sqlite:///") as info:
        Store("mysql://root:hunter2@db.internal/cards")
    assert "hunter2" not in str(info.value)
    assert isinstance(info.value, CardloopError)
    with pytest.raises(StoreError, match="psycopg2"):
        Store("postgresql+psycopg2://u@h/db")
    with pytest.raises(StoreError, match="not a database URL"):
        Store("just-a-file.sqlite")


def test_repr_and_url_never_show_the_password() -> None:
    store = Store("postgresql://cardloop:hunter2@db.internal:5432/cards")  # the engine connects lazily
    try:
        for shown in (repr(store), str(store), store.url, f"{store}"):
            assert "hunter2" not in shown
        assert store.url == "postgresql+psycopg://cardloop:***@db.internal:5432/cards"
        assert store.dialect == "postgresql"
    finally:
        store.close()


def test_in_memory_store_serializes_threads() -> None:
    with Store.open("sqlite://") as store:
        seqs = run_threads(4, lambda t: [store.append_message(KEY, user(f"{t}/{i}")) for i in range(25)])
        assert sorted(seq for chunk in seqs for seq in chunk) == list(range(100))
        assert store.message_count(KEY) == 100


def test_migrate_twice_is_a_no_op(store: Store) -> None:
    assert store.schema_version() == len(MIGRATIONS)
    assert store.migrate() == []
    assert store.migrate() == []
    with store.engine.connect() as conn:
        rows = conn.execute(select(store_schema.schema_versions.c.version)).scalars().all()
    assert rows == [m.version for m in MIGRATIONS]


def test_migrated_database_matches_the_table_definitions(store: Store) -> None:
    inspector = inspect(store.engine)
    for table in store_schema.metadata.sorted_tables:
        reflected = {c["name"]: c for c in inspector.get_columns(table.name)}
        assert set(reflected) == {c.name for c in table.columns}, table.name
        for column in table.columns:
            assert reflected[column.name]["nullable"] == column.nullable, f"{table.name}.{column.name}"
        assert set(inspector.get_pk_constraint(table.name)["constrained_columns"]) == {
            c.name for c in table.primary_key
        }, table.name
        if table.name != "cardloop_schema":
            assert "tenant" in reflected, f"{table.name} must carry tenant for row-level security"
        indexes = {ix["name"] for ix in inspector.get_indexes(table.name)}
        assert {ix.name for ix in table.indexes} <= indexes, table.name


def test_concurrent_migrate_applies_each_version_once(db_url: str) -> None:
    n = len(MIGRATIONS)
    extra = (
        *MIGRATIONS,
        Migration(n + 1, "extra table", ("CREATE TABLE extra (tenant VARCHAR(100) NOT NULL, at {timestamp})",)),
        Migration(n + 2, "a callable", (lambda conn: conn.exec_driver_sql("INSERT INTO extra (tenant) VALUES ('x')"),)),
    )
    stores = [Store(db_url) for _ in range(2)]
    try:
        applied = run_threads(2, lambda i: store_migrations.migrate(stores[i]._db, extra))
        assert sorted(v for part in applied for v in part) == list(range(1, n + 3))
        assert all(part == sorted(part) for part in applied)
        with stores[0].engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM extra")).scalar_one() == 1
            assert conn.execute(text("SELECT count(*) FROM cardloop_schema")).scalar_one() == n + 2
        assert store_migrations.migrate(stores[1]._db, extra) == []
        # The code of this release knows only its own versions: the database is newer than it.
        with pytest.raises(StoreError, match=rf"schema version {n + 2}, newer than this cardloop knows \(up to {n}\)"):
            Store.open(db_url)
    finally:
        for s in stores:
            s.close()


def test_newer_schema_version_is_refused_with_a_clear_message(db_url: str) -> None:
    url = make_url(db_url)
    if url.drivername.startswith("postgres"):
        url = url.set(password="hunter2")  # trust auth ignores it; the message must not show it
    with Store.open(url.render_as_string(hide_password=False)) as store, store.engine.begin() as conn:
        conn.execute(store_schema.schema_versions.insert().values(version=99, description="from the future"))
    with pytest.raises(StoreError, match=r"has schema version 99, newer than this cardloop knows") as info:
        Store.open(url.render_as_string(hide_password=False))
    assert "hunter2" not in str(info.value)


def test_a_password_in_the_urls_query_is_hidden_too(db_url: str) -> None:
    # libpq reads `?password=` as well as the userinfo: a URL written that way printed it in the
    # worker's start-up line, `doctor` and every store error.
    url = make_url(db_url)
    if not url.drivername.startswith("postgres"):
        pytest.skip("only a server URL carries a password")
    with Store.open(url.update_query_dict({"password": "hunter2"}).render_as_string(hide_password=False)) as store:
        assert "hunter2" not in store.url and "password=%2A%2A%2A" in store.url
    unreachable = url.set(port=1).update_query_dict({"password": "hunter2", "connect_timeout": "2"})
    with pytest.raises(StoreError) as info:
        Store.open(unreachable.render_as_string(hide_password=False))
    assert "hunter2" not in str(info.value)


def test_a_failing_migration_leaves_no_trace(store: Store) -> None:
    def fail(_: Any) -> None:
        raise RuntimeError("step 2 failed")

    n = len(MIGRATIONS)
    broken = (*MIGRATIONS, Migration(n + 1, "half done", ("CREATE TABLE half (tenant VARCHAR(100))", fail)))
    with pytest.raises(RuntimeError, match="step 2 failed"):
        store_migrations.migrate(store._db, broken)
    assert store.schema_version() == n
    assert "half" not in inspect(store.engine).get_table_names()  # DDL rolled back with it


def test_unreachable_database_is_a_store_error_naming_it_without_the_password() -> None:
    masked = r"postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/x"
    with pytest.raises(StoreError, match=f"cannot open the store at {masked}") as info:
        Store.open("postgresql://u:hunter2@127.0.0.1:1/x")
    assert "hunter2" not in str(info.value)


def test_migrations_must_be_numbered_in_order(store: Store) -> None:
    with pytest.raises(StoreError, match="numbered 1, 2, 3"):
        store_migrations.migrate(store._db, (MIGRATIONS[0], Migration(3, "gap", ())))


# -- cards --------------------------------------------------------------------------------------


def test_card_round_trip_with_history_and_context(store: Store) -> None:
    card = example_card()
    assert card_key_for(card) == KEY
    assert store.get_card(KEY) is None and store.card_fields(KEY) is None
    store_full_card(store, card)

    assert store.get_card(KEY) == card
    assert store.card_fields(KEY) == card.model_copy(update={"history": (), "context": ()})
    assert store.messages(KEY) == list(card.history)
    assert store.context_items(KEY) == list(card.context)

    # Re-syncing the card from the board changes its fields and leaves history and context alone.
    renamed = card.model_copy(update={"title": "Refund rounding (urgent)", "history": (), "context": ()})
    store.upsert_card(KEY, renamed)
    assert store.get_card(KEY) == card.model_copy(update={"title": "Refund rounding (urgent)"})


def test_a_card_gone_from_its_board_is_marked_until_its_next_move(store: Store) -> None:
    assert store.set_gone(KEY, "archived on github by sam") is False  # no such card: nothing changes
    card = example_card()
    store_full_card(store, card)
    assert store.card_gone(KEY) is None
    before = datetime.now(UTC)
    assert store.set_gone(KEY, "archived on github by sam") is True
    note, at = store.card_gone(KEY) or ("", before)
    assert note == "archived on github by sam" and at >= before - timedelta(seconds=1)
    assert [r["gone"] for r in store.card_rows()] == ["archived on github by sam"]
    # A board edit of the card's fields keeps the mark; its fields and history stay as they were.
    store.upsert_card(KEY, card.model_copy(update={"title": "renamed", "history": (), "context": ()}))
    assert store.card_gone(KEY) is not None and store.messages(KEY) == list(card.history)
    assert store.set_gone(KEY, None) is True    # moved again
    assert store.set_gone(KEY, None) is False   # the common move: nothing to clear
    assert store.card_gone(KEY) is None and store.card_rows()[0]["gone"] is None


def test_timestamps_are_stored_in_utc(store: Store) -> None:
    at = datetime(2025, 3, 1, 11, 31, tzinfo=timezone(timedelta(hours=2)))
    store.append_message(KEY, user("x", created_at=at))
    store.append_message(KEY, user("no time"))  # the store never makes one up
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT created_at FROM messages ORDER BY seq")).all()
    assert rows[1][0] is None
    assert store.messages(KEY)[0].created_at == at  # the message itself keeps its offset
    col = store_schema.messages.c.created_at
    with store.engine.connect() as conn:
        stored = conn.execute(select(col).order_by(store_schema.messages.c.seq)).scalars().all()
    assert stored == [datetime(2025, 3, 1, 9, 31, tzinfo=UTC), None]


def test_card_key_must_name_the_cards_tenant(store: Store) -> None:
    with pytest.raises(StoreError, match="names tenant 'other' but the card belongs to 'acme'"):
        store.upsert_card("other/github/PAY-142", example_card())
    for bad in ("acme", "acme/github", "acme//x", "/github/x", "acme/git hub/x", "a" * 600):
        with pytest.raises(StoreError, match="card key"):
            store.message_count(bad)


def test_tool_result_without_its_call_is_accepted_but_not_a_valid_card(store: Store) -> None:
    store.upsert_card(KEY, example_card().model_copy(update={"history": (), "context": ()}))
    orphan = Message(role="tool", content="result", tool_call_id="call_unknown")
    assert store.append_message(KEY, orphan) == 0
    assert store.messages(KEY) == [orphan]
    with pytest.raises(StoreError, match=r"do not form a valid card: .*call_unknown"):
        store.get_card(KEY)


# -- chat history --------------------------------------------------------------------------------


def test_append_is_idempotent_under_retry(store: Store) -> None:
    assert store.append_message(KEY, user("first"), dedup_key="comment/1") == 0
    assert store.append_message(KEY, user("second"), dedup_key="comment/2") == 1
    # A retried activity appends the same message again: nothing is added, the first seq comes back.
    assert store.append_message(KEY, user("first"), dedup_key="comment/1") == 0
    assert store.append_message(KEY, user("second"), dedup_key="comment/2") == 1
    # Dedup keys are per card.
    assert store.append_message("acme/github/PAY-143", user("first"), dedup_key="comment/1") == 0
    # Without a key every call appends.
    assert store.append_message(KEY, user("again")) == 2
    assert store.append_message(KEY, user("again")) == 3
    assert store.message_count(KEY) == 4
    assert [m.content for m in store.messages(KEY)] == ["first", "second", "again", "again"]


def test_first_seq_under_finds_where_a_stage_run_began(store: Store) -> None:
    """A stage run's messages share its workflow id as dedup-key prefix; LIKE's wildcards in an id
    (`_`, `%`) match only themselves."""
    store.append_message(KEY, user("before"), dedup_key="comment/1")
    store.append_message(KEY, user("other run"), dedup_key="stage_a%1/turn-1")
    store.append_message(KEY, user("reply"), dedup_key="stage_a/turn-1")
    store.append_message(KEY, user("tool"), dedup_key="stage_a/tool-1-x")
    assert store.first_seq_under(KEY, "stage_a/") == 2
    assert store.first_seq_under(KEY, "stage_a%1/") == 1
    assert store.first_seq_under(KEY, "stageXa/") is None
    assert store.first_seq_under(KEY, "stage_b/") is None


def test_concurrent_retries_of_one_append_add_it_once(store: Store) -> None:
    store.append_message(KEY, user("before"))
    seqs = run_threads(8, lambda _: store.append_message(KEY, user("once"), dedup_key="turn/7"))
    assert seqs == [1] * 8
    assert store.message_count(KEY) == 2


def test_eight_threads_appending_get_distinct_consecutive_seqs(store: Store) -> None:
    def append_50(thread: int) -> list[int]:
        return [
            store.append_message(KEY, user(f"{thread}/{i}"), dedup_key=f"{thread}/{i}", stage="coding")
            for i in range(50)
        ]

    per_thread = run_threads(8, append_50)
    assert sorted(seq for seqs in per_thread for seq in seqs) == list(range(400))
    assert all(seqs == sorted(seqs) for seqs in per_thread)  # each thread's own order is kept
    stored = store.messages(KEY)
    assert store.message_count(KEY) == len(stored) == 400
    for thread, seqs in enumerate(per_thread):
        assert [stored[seq].content for seq in seqs] == [f"{thread}/{i}" for i in range(50)]


def test_messages_window(store: Store) -> None:
    for i in range(10):
        store.append_message(KEY, user(f"m{i}"))

    def window(start: int = 0, end: int | None = None) -> list[str]:
        return [m.content for m in store.messages(KEY, start, end)]

    assert window(3, 7) == ["m3", "m4", "m5", "m6"]
    assert window(8) == ["m8", "m9"]
    assert window(0, 2) == ["m0", "m1"]
    assert window(5, 5) == [] and window(7, 3) == [] and window(20) == []
    assert store.messages("acme/github/unknown") == [] and store.message_count("acme/github/unknown") == 0
    with pytest.raises(StoreError, match="cannot be negative"):
        store.messages(KEY, -1)


# -- context items --------------------------------------------------------------------------------


def test_context_put_with_replace_kinds_drops_every_earlier_item_of_those_kinds(store: Store) -> None:
    def item(kind: ContextKind, source: str) -> ContextItem:
        return ContextItem(kind=kind, source=source, content=f"{kind.value} from {source}")

    old_log, adr, old_pod = (item(ContextKind.BUILD_LOG, "run/1"), item(ContextKind.ADR, "docs/adr/1.md"),
                             item(ContextKind.POD_LOG, "k8s:pay/pod/a"))
    store.put_context_items(KEY, [old_log, adr, old_pod])
    new_log = item(ContextKind.BUILD_LOG, "run/2")
    store.put_context_items(KEY, [new_log], replace_kinds=["build_log"])  # CI looked again
    assert store.context_items(KEY) == [adr, old_pod, new_log]
    store.put_context_items(KEY, [], replace_kinds=["pod_log"])  # no unhealthy pod any more
    assert store.context_items(KEY) == [adr, new_log]


def test_context_put_replaces_the_items_of_the_same_source(store: Store) -> None:
    def log(source: str, content: str) -> ContextItem:
        return ContextItem(kind=ContextKind.BUILD_LOG, source=source, content=content)

    a1, b1, a2, a3 = log("run/a", "a1"), log("run/b", "b1"), log("run/a", "a2"), log("run/a", "a3")
    store.put_context_items(KEY, [a1, b1])
    store.put_context_items(KEY, [a2, a3])
    assert store.context_items(KEY) == [b1, a2, a3]
    store.put_context_items(KEY, [a2, a3])  # a retry changes nothing
    assert store.context_items(KEY) == [b1, a2, a3]
    store.put_context_items(KEY, [])
    assert store.context_items(KEY) == [b1, a2, a3]
    # Contents are kept by digest, once per tenant, and readable as blobs.
    assert store.get_blob(blob_ref("a3"), tenant="acme") == "a3"
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM blobs")).scalar_one() == 4
    assert store.context_items("acme/github/other") == []


# -- blobs ----------------------------------------------------------------------------------------


def test_blob_round_trip_and_missing_ref(store: Store) -> None:
    prompt = "system: be careful\x00\nünïcödé ✓ \U0001f600 \ud800\n" + "log line\n" * 50_000
    ref = store.put_blob("acme", prompt, "prompt")
    assert ref == blob_ref(prompt) and ref.startswith("sha256:") and len(ref) == 7 + 64
    assert ref == "sha256:" + hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()
    assert store.put_blob("acme", prompt, "prompt") == ref  # idempotent
    assert store.put_blob("globex", prompt, "prompt") == ref  # the same text for another tenant
    assert store.get_blob(ref, tenant="acme") == prompt
    assert store.get_blob(store.put_blob("acme", "", "empty"), tenant="acme") == ""
    # A ref alone opens nothing: blobs are content-addressed per tenant.
    with pytest.raises(StoreError, match="name its tenant"):
        store.get_blob(ref)

    missing = "sha256:" + "0" * 64
    with pytest.raises(NotFoundError, match=f"blob {missing} is not in the store") as info:
        store.get_blob(missing, tenant="acme")
    assert isinstance(info.value, KeyError) and isinstance(info.value, StoreError)
    with pytest.raises(StoreError, match="expected 'sha256:'"):
        store.get_blob("md5:abc", tenant="acme")
    with pytest.raises(StoreError, match="tenant"):
        store.put_blob("", "x", "prompt")
    # The card's own tenant rule: nothing is stored under a tenant no card could name.
    for tenant in ("Acme", "acme.corp", "acme:eu", "acme\n", "-acme", "a" * 101):
        with pytest.raises(StoreError, match="lower-case letters, digits"):
            store.put_blob(tenant, "x", "prompt")
    assert store.put_blob("acme-eu_2", "x", "prompt").startswith("sha256:")


# -- summaries -------------------------------------------------------------------------------------


def test_summary_cache_exact_and_best(store: Store) -> None:
    model = "claude-haiku"
    assert store.put_summary(KEY, 0, 9, model, "s0-9", 40, "llm")
    assert store.put_summary(KEY, 0, 19, model, "s0-19", 50, "incremental")
    assert store.put_summary(KEY, 0, 29, model, "s0-29", 60, "incremental")
    assert store.put_summary(KEY, 10, 19, model, "s10-19", 30, "llm")
    # Idempotent: a retry (even with a different text) keeps the first, so every reader agrees.
    assert not store.put_summary(KEY, 0, 19, model, "other", 1, "llm")

    exact = store.find_summary(KEY, 0, 19, model)
    assert exact is not None
    assert (exact.first, exact.last, exact.text, exact.tokens, exact.method) == (0, 19, "s0-19", 50, "incremental")
    assert store.find_summary(KEY, 0, 25, model) is None
    assert store.find_summary(KEY, 0, 19, "other-model") is None

    def best(first: int, last: int, m: str = model) -> str | None:
        found = store.best_summary(KEY, first, last, m)
        return None if found is None else found.text

    assert best(0, 25) == "s0-19"  # incremental: fold 20..25 into it
    assert best(0, 29) == "s0-29"
    assert best(0, 100) == "s0-29"
    assert best(0, 5) is None
    assert best(10, 40) == "s10-19"
    assert best(5, 40) is None
    assert best(0, 25, "other-model") is None
    with pytest.raises(StoreError, match="first <= last"):
        store.best_summary(KEY, 5, 4, model)


# -- usage ---------------------------------------------------------------------------------------


def usage(call_key: str, stage: str, cost: Any, purpose: str = "turn", **tokens: int) -> UsageRecord:
    return UsageRecord(
        call_key=call_key,
        card_key=KEY,
        tenant="acme",
        stage=stage,
        profile="default",
        provider="anthropic",
        model="claude-sonnet",
        purpose=purpose,
        cost_usd=cost,
        created_at=datetime(2025, 3, 1, tzinfo=UTC),
        **tokens,
    )


def test_usage_is_recorded_once_per_call_and_totalled(store: Store) -> None:
    wf = "card/acme/github/PAY-142"
    assert store.record_usage(usage(f"{wf}/coding-1/1/turn", "coding", 0.1, input_tokens=1000, output_tokens=200))
    assert store.record_usage(
        usage(f"{wf}/coding-1/2/turn", "coding", 0.2, input_tokens=1500, output_tokens=100, cache_read_tokens=900)
    )
    assert store.record_usage(
        usage(f"{wf}/coding-1/2/summary", "coding", Decimal("0.000000001"), "summary", input_tokens=50)
    )
    assert store.record_usage(usage(f"{wf}/review-1/1/turn", "review", "1.25", cache_write_tokens=300))
    # A retried activity records the same call again: not counted twice.
    assert not store.record_usage(usage(f"{wf}/coding-1/1/turn", "coding", 0.1, input_tokens=1000))

    totals = store.usage_totals(KEY)
    coding, review = totals.by_stage["coding"], totals.by_stage["review"]
    assert set(totals.by_stage) == {"coding", "review"}
    assert (coding.calls, coding.input_tokens, coding.output_tokens, coding.cache_read_tokens) == (3, 2550, 300, 900)
    assert coding.cost_usd == Decimal("0.300000001")  # exact: no float drift
    assert (review.calls, review.cache_write_tokens, review.cost_usd) == (1, 300, Decimal("1.25"))
    assert totals.total.calls == 4 and totals.total.input_tokens == 2550
    assert totals.total.cost_usd == Decimal("1.550000001")

    empty = store.usage_totals("acme/github/none")
    assert empty.by_stage == {} and empty.total.calls == 0 and empty.total.cost_usd == 0


def test_usage_record_tenant_must_match_its_card() -> None:
    with pytest.raises(ValidationError, match="does not match card key"):
        UsageRecord(call_key="k", card_key=KEY, tenant="globex", stage="coding", created_at=datetime.now(UTC))


# -- deliveries ----------------------------------------------------------------------------------


def test_delivery_dedup(store: Store) -> None:
    assert store.record_delivery("acme", "github", "d-1")
    assert not store.record_delivery("acme", "github", "d-1")
    assert store.record_delivery("acme", "linear", "d-1")
    assert store.record_delivery("globex", "github", "d-1")
    assert run_threads(4, lambda _: store.record_delivery("acme", "github", "d-2")).count(True) == 1


def test_delivery_seen_is_what_record_delivery_remembered(store: Store) -> None:
    assert not store.delivery_seen("acme", "github", "sha256:aa")
    assert store.record_delivery("acme", "github", "sha256:aa")
    assert store.delivery_seen("acme", "github", "sha256:aa")
    assert not store.delivery_seen("acme", "linear", "sha256:aa")
    assert not store.delivery_seen("globex", "github", "sha256:aa")
    with pytest.raises(TenantScopeError):
        store.for_tenant("globex").delivery_seen("acme", "github", "sha256:aa")


def test_a_cached_upsert_refuses_a_python_value_it_would_freeze(store: Store) -> None:
    # The statement is cached by column names: a value in `extra` would be the first call's forever.
    with pytest.raises(TypeError, match="SQL expressions"):
        store._upsert(store_schema.cards, ("tenant", "card_key"), ("stage",), {"updated_at": datetime.now(UTC)})
