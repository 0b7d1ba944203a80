"""Tables and the versioned migrations that create them.

The `Table` objects below describe the schema as the code uses it *after* every migration.
Migrations never build DDL from them: a migration is frozen once released, while the tables
move on. `tests/cardloop/test_store.py` checks that the migrated database and these tables agree.

To change the schema: append a `Migration` with the next version (never edit a released one)
and update the tables. Each migration runs in its own transaction together with the insert of
its version into `cardloop_schema`, so it is applied completely or not at all.

Every table but `cardloop_schema` carries `tenant`, for row-level security on PostgreSQL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Dialect,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    select,
    text,
)

from cardloop.store.engine import Database
from cardloop.store.values import StoreError

log = logging.getLogger("cardloop.store")


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps in UTC both ways; a naive datetime is taken to be UTC already."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        # SQLite stores text; without an offset the values sort and compare as times.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _now() -> Any:
    return func.current_timestamp()


def _zero() -> Any:
    return text("0")


metadata = MetaData()

schema_versions = Table(
    "cardloop_schema",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", Text, nullable=False),
    Column("applied_at", UTCDateTime, nullable=False, server_default=_now()),
)

cards = Table(
    "cards",
    metadata,
    Column("card_key", String(500), primary_key=True),
    Column("tenant", String(100), nullable=False),
    Column("board", String(100), nullable=False),
    Column("card_id", String(200), nullable=False),
    Column("repo", String(200)),
    Column("stage", String(64)),
    # The Card without history and context, as pydantic JSON: exact round trip, no column per field.
    Column("fields", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    Index("ix_cards_tenant_board", "tenant", "board"),
    Index("ix_cards_tenant_repo", "tenant", "repo"),
)

# One row per card, locked by every append and context put: it hands out message seqs and
# context positions, so concurrent writers to one card queue on it instead of colliding.
card_counters = Table(
    "card_counters",
    metadata,
    Column("card_key", String(500), primary_key=True),
    Column("tenant", String(100), nullable=False),
    Column("next_message_seq", BigInteger, nullable=False, server_default=_zero()),
    Column("next_context_ord", BigInteger, nullable=False, server_default=_zero()),
)

messages = Table(
    "messages",
    metadata,
    Column("card_key", String(500), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("dedup_key", String(500)),
    Column("role", String(16), nullable=False),
    Column("stage", String(64)),
    Column("message_id", String(200)),
    Column("created_at", UTCDateTime),
    Column("body", Text, nullable=False),  # the Message as pydantic JSON
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("card_key", "seq", name="pk_messages"),
    UniqueConstraint("card_key", "dedup_key", name="uq_messages_dedup"),
)

context_items = Table(
    "context_items",
    metadata,
    Column("card_key", String(500), nullable=False),
    Column("ord", BigInteger, nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("source", String(500), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("content_ref", String(80), nullable=False),
    Column("meta", Text, nullable=False),  # the ContextItem without content, as JSON
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("card_key", "ord", name="pk_context_items"),
    Index("ix_context_items_source", "card_key", "source"),
)

blobs = Table(
    "blobs",
    metadata,
    Column("ref", String(80), nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    # Bytes, not text: logs may hold NUL characters, which PostgreSQL text refuses.
    Column("data", LargeBinary, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    # Per tenant: the same log put by two tenants is two rows, so row-level security can hide each.
    PrimaryKeyConstraint("ref", "tenant", name="pk_blobs"),
)

summaries = Table(
    "summaries",
    metadata,
    Column("card_key", String(500), nullable=False),
    Column("model", String(200), nullable=False),
    Column("first_seq", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("method", String(32), nullable=False),
    Column("tokens", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("card_key", "model", "first_seq", "last_seq", name="pk_summaries"),
)

llm_usage = Table(
    "llm_usage",
    metadata,
    Column("call_key", String(500), primary_key=True),
    Column("card_key", String(500), nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("stage", String(64), nullable=False),
    Column("profile", String(100), nullable=False),
    Column("provider", String(64), nullable=False),
    Column("model", String(200), nullable=False),
    Column("purpose", String(16), nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    # Integer billionths of a dollar: exact sums on both databases without a DECIMAL type on SQLite.
    Column("cost_nanousd", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    Index("ix_llm_usage_card", "card_key", "stage"),
    Index("ix_llm_usage_tenant_time", "tenant", "created_at"),
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("source", String(100), nullable=False),
    Column("delivery_id", String(300), nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("tenant", "source", "delivery_id", name="pk_deliveries"),
    Index("ix_deliveries_inserted_at", "inserted_at"),  # for pruning old ids
)


# ---------------------------------------------------------------------------------------------
# Migrations

Step = str | Callable[[Connection], None]

# DDL strings are portable SQL with these placeholders filled per dialect.
_TYPES: dict[str, dict[str, str]] = {
    "sqlite": {"timestamp": "TIMESTAMP", "bytes": "BLOB"},
    "postgresql": {"timestamp": "TIMESTAMP WITH TIME ZONE", "bytes": "BYTEA"},
}


@dataclass(frozen=True)
class Migration:
    """One schema version: DDL strings (with {timestamp}/{bytes} placeholders) or callables."""

    version: int
    description: str
    steps: tuple[Step, ...]

    def apply(self, conn: Connection) -> None:
        types = _TYPES[conn.dialect.name]
        for step in self.steps:
            if callable(step):
                step(conn)
            else:
                conn.exec_driver_sql(step.format(**types))


_V1 = (
    """CREATE TABLE cards (
        card_key VARCHAR(500) NOT NULL PRIMARY KEY,
        tenant VARCHAR(100) NOT NULL,
        board VARCHAR(100) NOT NULL,
        card_id VARCHAR(200) NOT NULL,
        repo VARCHAR(200),
        stage VARCHAR(64),
        fields TEXT NOT NULL,
        created_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        updated_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP
    )""",
    "CREATE INDEX ix_cards_tenant_board ON cards (tenant, board)",
    "CREATE INDEX ix_cards_tenant_repo ON cards (tenant, repo)",
    """CREATE TABLE card_counters (
        card_key VARCHAR(500) NOT NULL PRIMARY KEY,
        tenant VARCHAR(100) NOT NULL,
        next_message_seq BIGINT NOT NULL DEFAULT 0,
        next_context_ord BIGINT NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE messages (
        card_key VARCHAR(500) NOT NULL,
        seq BIGINT NOT NULL,
        tenant VARCHAR(100) NOT NULL,
        dedup_key VARCHAR(500),
        role VARCHAR(16) NOT NULL,
        stage VARCHAR(64),
        message_id VARCHAR(200),
        created_at {timestamp},
        body TEXT NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_messages PRIMARY KEY (card_key, seq),
        CONSTRAINT uq_messages_dedup UNIQUE (card_key, dedup_key)
    )""",
    """CREATE TABLE context_items (
        card_key VARCHAR(500) NOT NULL,
        ord BIGINT NOT NULL,
        tenant VARCHAR(100) NOT NULL,
        source VARCHAR(500) NOT NULL,
        kind VARCHAR(32) NOT NULL,
        content_ref VARCHAR(80) NOT NULL,
        meta TEXT NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_context_items PRIMARY KEY (card_key, ord)
    )""",
    "CREATE INDEX ix_context_items_source ON context_items (card_key, source)",
    """CREATE TABLE blobs (
        ref VARCHAR(80) NOT NULL,
        tenant VARCHAR(100) NOT NULL,
        kind VARCHAR(64) NOT NULL,
        size BIGINT NOT NULL,
        data {bytes} NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_blobs PRIMARY KEY (ref, tenant)
    )""",
    """CREATE TABLE summaries (
        card_key VARCHAR(500) NOT NULL,
        model VARCHAR(200) NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        tenant VARCHAR(100) NOT NULL,
        method VARCHAR(32) NOT NULL,
        tokens INTEGER NOT NULL,
        text TEXT NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_summaries PRIMARY KEY (card_key, model, first_seq, last_seq)
    )""",
    """CREATE TABLE llm_usage (
        call_key VARCHAR(500) NOT NULL PRIMARY KEY,
        card_key VARCHAR(500) NOT NULL,
        tenant VARCHAR(100) NOT NULL,
        stage VARCHAR(64) NOT NULL,
        profile VARCHAR(100) NOT NULL,
        provider VARCHAR(64) NOT NULL,
        model VARCHAR(200) NOT NULL,
        purpose VARCHAR(16) NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cache_read_tokens BIGINT NOT NULL,
        cache_write_tokens BIGINT NOT NULL,
        cost_nanousd BIGINT NOT NULL,
        created_at {timestamp} NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP
    )""",
    "CREATE INDEX ix_llm_usage_card ON llm_usage (card_key, stage)",
    "CREATE INDEX ix_llm_usage_tenant_time ON llm_usage (tenant, created_at)",
    """CREATE TABLE deliveries (
        tenant VARCHAR(100) NOT NULL,
        source VARCHAR(100) NOT NULL,
        delivery_id VARCHAR(300) NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_deliveries PRIMARY KEY (tenant, source, delivery_id)
    )""",
    "CREATE INDEX ix_deliveries_inserted_at ON deliveries (inserted_at)",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "cards, chat history, context, blobs, summaries, LLM usage, deliveries", _V1),
)

_SCHEMA_TABLE_DDL = """CREATE TABLE IF NOT EXISTS cardloop_schema (
    version INTEGER NOT NULL PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP
)"""


def check_migrations(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"migrations must be numbered 1, 2, 3, ... in order; got {versions}")


def migrate(db: Database, migrations: Sequence[Migration] = MIGRATIONS) -> list[int]:
    """Apply the missing migrations in order; return the versions applied by this call.

    Safe to run from several processes at once: each transaction first takes the database's
    migration lock (an advisory lock on PostgreSQL, the write lock on SQLite), then re-reads
    which versions exist, so a migration another process applied meanwhile is skipped.
    """
    check_migrations(migrations)
    known = len(migrations)
    with db.write() as conn:
        applied = _lock_and_read_versions(conn, db, known)
    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        with db.write() as conn:
            applied = _lock_and_read_versions(conn, db, known)
            if migration.version in applied:
                continue
            migration.apply(conn)
            conn.execute(schema_versions.insert().values(version=migration.version, description=migration.description))
        log.info("store %s: applied migration %d (%s)", db.masked_url, migration.version, migration.description)
        done.append(migration.version)
    return done


def schema_version(conn: Connection) -> int:
    """The highest applied version (0 for an empty database)."""
    return conn.execute(select(func.coalesce(func.max(schema_versions.c.version), 0))).scalar_one()


def _lock_and_read_versions(conn: Connection, db: Database, known: int) -> set[int]:
    if conn.dialect.name == "postgresql":
        # Transaction-scoped, so it is released by commit, rollback or a dropped connection.
        # Keyed by schema: stores in different schemas of one database do not wait for each other.
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.cardloop_schema'))"))
    # Under the lock: concurrent CREATE TABLE IF NOT EXISTS can still collide on PostgreSQL.
    conn.exec_driver_sql(_SCHEMA_TABLE_DDL.format(**_TYPES[conn.dialect.name]))
    applied = set(conn.execute(select(schema_versions.c.version)).scalars())
    newest = max(applied, default=0)
    if newest > known:
        raise StoreError(
            f"the store at {db.masked_url} has schema version {newest}, newer than this cardloop knows "
            f"(up to {known}): it was migrated by a newer release. Upgrade cardloop, or use another database."
        )
    return applied
