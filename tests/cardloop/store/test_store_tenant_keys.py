"""Migration 4: keys scoped by tenant, card keys under their own tenant's prefix, blobs per tenant.

The attacks (issue 17, item 11), shown with raw SQL as the provisioned application role on the
machine's PostgreSQL, scoped to one tenant:

- insert a card (or history, counter, context, summary, usage row) keyed under another
  tenant's prefix: before, the policy let it in, the owner's own upsert then failed, and a
  duplicate-key error told the intruder the other tenant's key existed;
- read a blob by guessing its content hash.

And the upgrade: a database at version 3 (SQLite and PostgreSQL) migrates without losing a row,
keeps its indexes, and on PostgreSQL keeps the application role's grants.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError

from cardloop.prompts.card import ContextItem, ContextKind, Message
from cardloop.store import MIGRATIONS, Store, UsageRecord, blob_ref
from cardloop.store import migrations as store_migrations
from cardloop.store import schema as store_schema
from cardloop.store.engine import open_database
from tests.cardloop.store.store_kit import A_KEY, B_KEY, Cluster, card, scoped

V3 = MIGRATIONS[:3]
NOW = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def _engine(url: str) -> Engine:
    return create_engine(make_url(url).set(drivername="postgresql+psycopg"))


# Rows an intruder scoped to globex tries to plant under acme's prefix, one per card-keyed table.
_PLANTED = (
    "INSERT INTO cards (card_key, tenant, board, card_id, fields) VALUES ('{key}', 'globex', 'github', 'X', '{{}}')",
    "INSERT INTO card_counters (card_key, tenant) VALUES ('{key}', 'globex')",
    "INSERT INTO messages (card_key, seq, tenant, role, body) VALUES ('{key}', 0, 'globex', 'user', '{{}}')",
    "INSERT INTO context_items (card_key, ord, tenant, source, kind, content_ref, meta) "
    "VALUES ('{key}', 0, 'globex', 's', 'notes', 'sha256:00', '{{}}')",
    "INSERT INTO summaries (card_key, model, first_seq, last_seq, tenant, method, tokens, text) "
    "VALUES ('{key}', 'm', 0, 0, 'globex', 'llm', 1, 'x')",
    "INSERT INTO llm_usage (call_key, card_key, tenant, stage, profile, provider, model, purpose, input_tokens, "
    "output_tokens, cache_read_tokens, cache_write_tokens, cost_nanousd, created_at) "
    "VALUES ('c', '{key}', 'globex', 's', 'p', 'x', 'm', 'turn', 0, 0, 0, 0, 0, now())",
)


def _error_of(engine: Engine, statement: str) -> str:
    """What the intruder learns: the error class and the database's message, or "ok"."""
    try:
        with engine.begin() as conn:
            scoped(conn, "globex")
            conn.execute(text(statement))
    except DBAPIError as exc:
        return f"{type(exc).__name__}: {str(exc.orig).splitlines()[0]}"
    return "ok"


@pytest.mark.postgres
def test_no_row_under_another_tenants_prefix_and_no_key_oracle(cluster: Cluster) -> None:
    Store.provision_postgres_role(cluster.owner_url, cluster.app, "app-password-1")
    engine = _engine(cluster.app_url)
    try:
        with Store.open(cluster.app_url) as app_store:
            app_store.upsert_card(A_KEY, card(A_KEY))  # acme's card exists; acme/github/NEW does not
            app_store.append_message(A_KEY, Message(role="user", content="acme asks"))
            app_store.put_summary(A_KEY, 0, 0, "m", "acme summary", 3, "llm")
            for statement in _PLANTED:
                taken = _error_of(engine, statement.format(key=A_KEY))
                free = _error_of(engine, statement.format(key="acme/github/NEW"))
                # Refused by row-level security either way: the same answer whether the key exists.
                assert "row-level security" in taken and "ProgrammingError" in taken, statement
                assert taken == free, statement
            # Acme's own writes to the key the intruder aimed at keep working.
            app_store.upsert_card("acme/github/NEW", card("acme/github/NEW"))
            app_store.append_message("acme/github/NEW", Message(role="user", content="still mine"))
            assert app_store.get_card("acme/github/NEW").history[0].content == "still mine"  # type: ignore[union-attr]
            assert app_store.get_card(A_KEY).title == "card PAY-1"  # type: ignore[union-attr]
            # A call key or a delivery id another tenant uses is no collision (keys are per tenant).
            for tenant, key in (("acme", A_KEY), ("globex", B_KEY)):
                if tenant == "globex":
                    app_store.upsert_card(B_KEY, card(B_KEY))
                assert app_store.record_usage(UsageRecord(call_key="call-1", card_key=key, tenant=tenant,
                                                          stage="coding", input_tokens=1, created_at=NOW))
        # Own rows with a key outside one's own prefix are refused too (the prefix is in the policy).
        with pytest.raises(ProgrammingError, match="row-level security"), engine.begin() as conn:
            scoped(conn, "globex")
            conn.execute(text("UPDATE cards SET card_key = 'acme/github/MOVED' WHERE tenant = 'globex'"))
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_guessed_blob_hash_opens_nothing(cluster: Cluster) -> None:
    Store.provision_postgres_role(cluster.owner_url, cluster.app, "app-password-1")
    with Store.open(cluster.app_url) as app_store:
        ref = app_store.put_blob("acme", "acme's deploy log", "log")
        assert app_store.get_blob(ref, tenant="acme") == "acme's deploy log"
    engine = _engine(cluster.app_url)
    try:
        for scope in ("", "globex"):
            with engine.begin() as conn:
                if scope:
                    scoped(conn, scope)
                # The setting the removed read-by-ref policy read: it opens nothing any more.
                conn.execute(text("SELECT set_config('cardloop.blob_ref', :r, true)"), {"r": ref})
                assert conn.execute(text("SELECT count(*) FROM blobs WHERE ref = :r"), {"r": ref}).scalar_one() == 0
        # The same content under globex is globex's own row, not a collision with acme's.
        with Store.open(cluster.app_url) as app_store:
            assert app_store.put_blob("globex", "acme's deploy log", "log") == ref
        with engine.begin() as conn:
            policies = set(conn.execute(text("SELECT policyname FROM pg_policies WHERE schemaname = current_schema() "
                                                     "AND tablename = 'blobs'")).scalars())
        assert policies == {"tenant_isolation"}
    finally:
        engine.dispose()


# -- upgrading a version-3 database --------------------------------------------------------------


def _fill_v3(conn: Connection, keys: tuple[str, ...] = (A_KEY, B_KEY)) -> None:
    """Cards' rows written as version 3 held them (plain INSERTs: no conflict targets)."""
    for key in keys:
        tenant = key.split("/")[0]
        c = card(key)
        conn.execute(store_schema.cards.insert().values(
            card_key=key, tenant=tenant, board=c.board, card_id=c.id, repo=None, stage=None,
            fields=c.model_dump_json(exclude={"history", "context"}), workflow_state='{"x": 1}'))
        conn.execute(store_schema.card_counters.insert().values(card_key=key, tenant=tenant, next_message_seq=2,
                                                                next_context_ord=1))
        for seq in range(2):
            message = Message(role="user", content=f"{tenant} message {seq}")
            conn.execute(store_schema.messages.insert().values(
                card_key=key, seq=seq, tenant=tenant, dedup_key=f"d{seq}", role="user", body=message.model_dump_json()))
        item = ContextItem(kind=ContextKind.BUILD_LOG, source="ci", content=f"{tenant} log")
        data = item.content.encode()
        conn.execute(store_schema.blobs.insert().values(ref=blob_ref(item.content), tenant=tenant, kind="context",
                                                        size=len(data), data=data))
        conn.execute(store_schema.context_items.insert().values(
            card_key=key, ord=0, tenant=tenant, source="ci", kind="build_log", content_ref=blob_ref(item.content),
            meta=item.model_dump_json(exclude={"content"})))
        conn.execute(store_schema.summaries.insert().values(card_key=key, model="m", first_seq=0, last_seq=1,
                                                            tenant=tenant, method="llm", tokens=3, text="sum"))
        conn.execute(text(  # version 3's columns (the ledger's per-attempt columns came later)
            "INSERT INTO llm_usage (call_key, card_key, tenant, stage, profile, provider, model, purpose, "
            "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanousd, created_at) "
            "VALUES (:c, :k, :t, 'coding', 'p', 'anthropic', 'm', 'turn', 7, 1, 0, 0, 10, :at)"),
            {"c": f"{key}/1", "k": key, "t": tenant, "at": NOW})
        conn.execute(store_schema.deliveries.insert().values(tenant=tenant, source="github", delivery_id="d-1"))


def _row_counts(engine: Engine, tenants: tuple[str, ...] = ("acme", "globex")) -> dict[str, int]:
    counts: dict[str, int] = {}
    for tenant in tenants:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                scoped(conn, tenant)
            for table in sorted(set(store_schema.RLS_TABLES) & set(inspect(conn).get_table_names())):
                n = conn.execute(text(f"SELECT count(*) FROM {table} WHERE tenant = :t"), {"t": tenant}).scalar_one()
                counts[table] = counts.get(table, 0) + n
    return {table: n for table, n in counts.items() if n}  # a table added later starts empty


def _check_upgraded(store: Store) -> None:
    assert store.schema_version() == len(MIGRATIONS)
    for key, tenant in ((A_KEY, "acme"), (B_KEY, "globex")):
        full = store.get_card(key)
        assert full is not None
        assert [m.content for m in full.history] == [f"{tenant} message 0", f"{tenant} message 1"]
        assert [i.content for i in full.context] == [f"{tenant} log"]
        assert store.find_summary(key, 0, 1, "m").text == "sum"  # type: ignore[union-attr]
        assert store.usage_totals(key).total.input_tokens == 7
        assert store.record_delivery(tenant, "github", "d-1") is False
        assert store.workflow_state(key) == '{"x": 1}'
        # The counters carried over: the next append takes seq 2, a retried dedup key its old seq.
        assert store.append_message(key, Message(role="user", content="after"), dedup_key="d1") == 1
        assert store.append_message(key, Message(role="user", content="after")) == 2
    inspector = inspect(store.engine)
    for table, (_, uniques) in store_schema_tenant_keys().items():
        # As the schema declares it after every migration (the ledger's added `attempt` later).
        declared = tuple(c.name for c in store_schema.metadata.tables[table].primary_key.columns)
        assert declared[0] == "tenant"
        assert tuple(inspector.get_pk_constraint(table)["constrained_columns"]) == declared, table
        found = {u["name"]: tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)}
        for name, columns in uniques.items():
            assert found[name] == columns
        indexes = {ix["name"] for ix in inspector.get_indexes(table)}
        declared = {ix.name for ix in store_schema.metadata.tables[table].indexes}
        assert declared <= indexes, table


def store_schema_tenant_keys() -> dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]]:
    from cardloop.store.tenant_keys import TENANT_KEYS

    return TENANT_KEYS


def test_a_version_3_sqlite_database_upgrades_without_losing_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/v3.sqlite"
    db = open_database(url)
    try:
        assert store_migrations.migrate(db, V3) == [1, 2, 3]
        with db.engine.begin() as conn:
            _fill_v3(conn)
        before = _row_counts(db.engine)
    finally:
        db.dispose()
    with Store.open(url) as store:  # opening migrates
        assert _row_counts(store.engine) == before
        _check_upgraded(store)
        # Keys are per tenant now: another tenant's identical key is a row of its own.
        with store.engine.begin() as conn:
            conn.execute(text("INSERT INTO card_counters (card_key, tenant) VALUES (:k, 'globex')"), {"k": A_KEY})
            with pytest.raises(IntegrityError):
                conn.execute(text("INSERT INTO card_counters (card_key, tenant) VALUES (:k, 'acme')"), {"k": A_KEY})


@pytest.mark.postgres
def test_a_version_3_postgres_database_upgrades_and_keeps_the_app_roles_grants(cluster: Cluster) -> None:
    db = open_database(cluster.owner_url)
    try:
        assert store_migrations.migrate(db, V3) == [1, 2, 3]
    finally:
        db.dispose()
    # The release before this one provisioned the application role and wrote through it.
    with _engine(cluster.owner_url).begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {cluster.app} LOGIN NOSUPERUSER NOBYPASSRLS")
        for statement in store_migrations.provision_role_sql(conn, cluster.app):
            conn.exec_driver_sql(statement)
    app = _engine(cluster.app_url)
    try:
        for tenant, key in (("acme", A_KEY), ("globex", B_KEY)):
            with app.begin() as conn:
                scoped(conn, tenant)
                _fill_v3(conn, (key,))
        before = _row_counts(app)
        # The attack worked on version 3: globex plants a card under acme's prefix.
        assert _error_of(app, _PLANTED[0].format(key="acme/github/PLANTED")) == "ok"
        with Store.open(cluster.owner_url) as owner:  # the owner upgrades
            assert owner.schema_version() == len(MIGRATIONS)
        # Nothing lost, the application role still works without being provisioned again.
        assert _row_counts(app) == before
        with cluster.admin.begin() as conn:  # a superuser sees the planted row: kept, not deleted
            count = f"SELECT count(*) FROM {cluster.schema}.cards"
            assert conn.exec_driver_sql(count).scalar_one() == 3
        with Store.open(cluster.app_url) as app_store:
            _check_upgraded(app_store)
        # The planted row breaks the prefix rule: invisible even to globex, and no longer in acme's way.
        with app.begin() as conn:
            scoped(conn, "globex")
            assert conn.execute(text("SELECT count(*) FROM cards")).scalar_one() == 1
        with Store.open(cluster.app_url) as app_store:
            app_store.upsert_card("acme/github/PLANTED", card("acme/github/PLANTED"))
            assert app_store.card_fields("acme/github/PLANTED") is not None
        assert "row-level security" in _error_of(app, _PLANTED[0].format(key="acme/github/AGAIN"))
    finally:
        app.dispose()

