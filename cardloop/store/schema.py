"""Tables and the versioned migrations that create them.

The `Table` objects below describe the schema as the code uses it *after* every migration.
Migrations never build DDL from them: a migration is frozen once released, while the tables
move on. `tests/cardloop/test_store.py` checks that the migrated database and these tables agree.

To change the schema: append a `Migration` with the next version (never edit a released one)
and update the tables. Each migration runs in its own transaction together with the insert of
its version into `cardloop_schema`, so it is applied completely or not at all.

Every table but `cardloop_schema` carries `tenant`, for row-level security on PostgreSQL.

Tenant isolation (migration 2)
------------------------------
PostgreSQL enforces it: every table in `RLS_TABLES` has row-level security ENABLED and FORCED
(so it binds the tables' owner too, not only other roles) with one policy,

    tenant = current_setting('cardloop.tenant', true)       -- for reads and for writes (WITH CHECK)

and the store scopes each transaction with `set_config('cardloop.tenant', <tenant>, true)`
(engine.py). A transaction that is not scoped sees no tenant rows and can write none. Two
deliberate exceptions:

- Until migration 4, `blobs` also had a SELECT-only policy `ref = current_setting('cardloop.blob_ref',
  true)`; it let a guessed content hash open another tenant's blob and is gone (tenant_keys.py).
  Migration 4 also keys every table by tenant first and makes the card tables' policy require
  `card_key` to start with `<tenant>/`.
- `api_tokens` is the auth directory, read by token hash *before* the tenant is known. Its RLS
  is ENABLED but not FORCED: the application role only sees and changes its scoped tenant's
  tokens, and the lookup goes through `cardloop_token_tenant(hash, at)`, a SECURITY DEFINER
  function owned by the migrating (owner) role, which answers one hash's tenant and nothing else.

Superusers and BYPASSRLS roles skip all of this: the application must connect as an ordinary
role. `provision_role_sql` lists what such a role needs (`Store.provision_postgres_role` runs it).
On SQLite there is no row-level security: every tenant-scoped query filters by tenant itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
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
    false,
    func,
    inspect,
    select,
    text,
)

from cardloop.store.engine import Database
from cardloop.store.migration_ledger import V5
from cardloop.store.tenant_keys import scope_keys_by_tenant
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
    Column("card_key", String(500), nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("board", String(100), nullable=False),
    Column("card_id", String(200), nullable=False),
    Column("repo", String(200)),
    Column("stage", String(64)),
    # The Card without history and context, as pydantic JSON: exact round trip, no column per field.
    Column("fields", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    # The card workflow's state when its last run closed (CardState JSON; migration 3).
    Column("workflow_state", Text),
    # Keys are unique per tenant (migration 4): another tenant's key never collides with one's own.
    PrimaryKeyConstraint("tenant", "card_key", name="pk_cards"),
    Index("ix_cards_tenant_board", "tenant", "board"),
    Index("ix_cards_tenant_repo", "tenant", "repo"),
)

# One row per card, locked by every append and context put: it hands out message seqs and
# context positions, so concurrent writers to one card queue on it instead of colliding.
card_counters = Table(
    "card_counters",
    metadata,
    Column("card_key", String(500), nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("next_message_seq", BigInteger, nullable=False, server_default=_zero()),
    Column("next_context_ord", BigInteger, nullable=False, server_default=_zero()),
    PrimaryKeyConstraint("tenant", "card_key", name="pk_card_counters"),
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
    PrimaryKeyConstraint("tenant", "card_key", "seq", name="pk_messages"),
    UniqueConstraint("tenant", "card_key", "dedup_key", name="uq_messages_dedup"),
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
    PrimaryKeyConstraint("tenant", "card_key", "ord", name="pk_context_items"),
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
    # Content-addressed per tenant (migration 4): a ref opens a blob only in its tenant's scope.
    PrimaryKeyConstraint("tenant", "ref", name="pk_blobs"),
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
    PrimaryKeyConstraint("tenant", "card_key", "model", "first_seq", "last_seq", name="pk_summaries"),
)

# One row per provider call attempt (migration 5): the ledger that matches the provider's bill.
llm_usage = Table(
    "llm_usage",
    metadata,
    Column("call_key", String(500), nullable=False),
    Column("attempt", Integer, nullable=False, server_default=text("1")),
    Column("card_key", String(500), nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("stage", String(64), nullable=False),
    Column("profile", String(100), nullable=False),
    Column("provider", String(64), nullable=False),
    Column("model", String(200), nullable=False),
    Column("purpose", String(16), nullable=False),
    Column("retry", Boolean, nullable=False, server_default=false()),  # attempt > 1, or its reply came too late
    Column("kept", Boolean, nullable=False, server_default=text("TRUE")),  # its result is the one stored
    Column("status", String(16), nullable=False, server_default=text("'done'")),  # calling | done | failed
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    # Integer billionths of a dollar: exact sums on both databases without a DECIMAL type on SQLite.
    Column("cost_nanousd", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("tenant", "card_key", "call_key", "attempt", name="pk_llm_usage"),
    Index("ix_llm_usage_card", "card_key", "stage"),
    Index("ix_llm_usage_tenant_time", "tenant", "created_at"),
)

# The result of a side effect under its key (migration 5): the first recorded wins, and a
# retried activity returns it instead of acting again (activities/once.py).
effects = Table(
    "effects",
    metadata,
    Column("card_key", String(500), nullable=False),
    Column("effect_key", String(500), nullable=False),
    Column("tenant", String(100), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("result", Text, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("tenant", "card_key", "effect_key", name="pk_effects"),
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

# A tenant's custom system prompt: one immutable row per version. PUT, DELETE and rollback each
# append a version; nothing is ever updated or deleted here (the application role is granted
# SELECT and INSERT only). A deletion is a version with `deleted` set and empty fields.
tenant_prompts = Table(
    "tenant_prompts",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("version", Integer, nullable=False),
    Column("deleted", Boolean, nullable=False, server_default=false()),
    # What the prompt core uses: the validator's sanitized text (secrets redacted, invisible
    # characters removed). The submitted text is not kept, since it may hold a secret; its digest is.
    Column("custom_system_prompt", Text, nullable=False),
    Column("override_mode", String(32), nullable=False),
    Column("language_preference", String(64), nullable=False),
    Column("tone_profile", Text, nullable=False),  # JSON object of strings
    # VALID | SANITIZED; NULL on a deletion. A CHECK keeps REJECTED prompts out of the database.
    Column("validation_status", String(16)),
    Column("issues", Text, nullable=False),  # JSON list of {category, message, start, end}
    Column("submitted_sha256", String(64)),
    Column("restored_from", Integer),  # the version a rollback copied
    Column("created_by", String(200), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("tenant", "version", name="pk_tenant_prompts"),
)

# One row per tenant that ever had a prompt: hands out version numbers (writers queue on it, as
# on card_counters) and points at the active version; NULL after a DELETE.
tenant_prompt_heads = Table(
    "tenant_prompt_heads",
    metadata,
    Column("tenant", String(100), primary_key=True),
    Column("latest_version", Integer, nullable=False),
    Column("current_version", Integer),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Bearer tokens of the tenant API. Only the SHA-256 of a token is stored: the plaintext is shown
# once, when it is created. 32 random bytes need no slow hash: there is nothing to brute-force.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("tenant", String(100), nullable=False),
    Column("name", String(200), nullable=False),
    Column("token_sha256", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
    Column("last_used_at", UTCDateTime),
    UniqueConstraint("token_sha256", name="uq_api_tokens_hash"),
    Index("ix_api_tokens_tenant", "tenant"),
)

# Tables whose rows PostgreSQL hides from every transaction not scoped to their tenant.
RLS_TABLES: tuple[str, ...] = (
    "cards",
    "card_counters",
    "messages",
    "context_items",
    "blobs",
    "summaries",
    "llm_usage",
    "deliveries",
    "tenant_prompts",
    "tenant_prompt_heads",
    "effects",
)
TOKEN_LOOKUP_FUNCTION = "cardloop_token_tenant"


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

_V2_TABLES = (
    """CREATE TABLE tenant_prompts (
        tenant VARCHAR(100) NOT NULL,
        version INTEGER NOT NULL,
        deleted BOOLEAN NOT NULL DEFAULT FALSE,
        custom_system_prompt TEXT NOT NULL,
        override_mode VARCHAR(32) NOT NULL,
        language_preference VARCHAR(64) NOT NULL,
        tone_profile TEXT NOT NULL,
        validation_status VARCHAR(16),
        issues TEXT NOT NULL,
        submitted_sha256 VARCHAR(64),
        restored_from INTEGER,
        created_by VARCHAR(200) NOT NULL,
        created_at {timestamp} NOT NULL,
        CONSTRAINT pk_tenant_prompts PRIMARY KEY (tenant, version),
        CONSTRAINT ck_tenant_prompts_mode CHECK (override_mode IN ('append', 'replace_behavior')),
        CONSTRAINT ck_tenant_prompts_status CHECK (
            (deleted AND validation_status IS NULL) OR (NOT deleted AND validation_status IN ('VALID', 'SANITIZED'))
        ),
        CONSTRAINT ck_tenant_prompts_version CHECK (version >= 1)
    )""",
    """CREATE TABLE tenant_prompt_heads (
        tenant VARCHAR(100) NOT NULL PRIMARY KEY,
        latest_version INTEGER NOT NULL,
        current_version INTEGER,
        updated_at {timestamp} NOT NULL
    )""",
    """CREATE TABLE api_tokens (
        id VARCHAR(40) NOT NULL PRIMARY KEY,
        tenant VARCHAR(100) NOT NULL,
        name VARCHAR(200) NOT NULL,
        token_sha256 VARCHAR(64) NOT NULL,
        created_at {timestamp} NOT NULL,
        revoked_at {timestamp},
        last_used_at {timestamp},
        CONSTRAINT uq_api_tokens_hash UNIQUE (token_sha256)
    )""",
    "CREATE INDEX ix_api_tokens_tenant ON api_tokens (tenant)",
)

# Frozen with migration 2 (RLS_TABLES may grow with later migrations; this list may not).
_V2_RLS_TABLES = (
    "cards",
    "card_counters",
    "messages",
    "context_items",
    "blobs",
    "summaries",
    "llm_usage",
    "deliveries",
    "tenant_prompts",
    "tenant_prompt_heads",
)
_TENANT_POLICY = (
    "CREATE POLICY tenant_isolation ON {table} "
    "USING (tenant = current_setting('cardloop.tenant', true)) "
    "WITH CHECK (tenant = current_setting('cardloop.tenant', true))"
)


def _v2_row_level_security(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return  # SQLite has none: the store's queries filter by tenant
    for table in _V2_RLS_TABLES:
        conn.exec_driver_sql(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        # FORCE: the owner is bound too, so an application that connects as the owner is still isolated.
        conn.exec_driver_sql(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        conn.exec_driver_sql(_TENANT_POLICY.format(table=table))
    conn.exec_driver_sql(
        "CREATE POLICY read_by_ref ON blobs FOR SELECT USING (ref = current_setting('cardloop.blob_ref', true))"
    )
    # Not FORCED: the owner-defined lookup function below reads across tenants, by hash only.
    conn.exec_driver_sql("ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY")
    conn.exec_driver_sql(_TENANT_POLICY.format(table="api_tokens"))
    schema = conn.dialect.identifier_preparer.quote(conn.execute(text("SELECT current_schema()")).scalar_one())
    # SECURITY DEFINER runs as the owner: a pinned search_path (pg_temp last) and qualified names
    # keep a caller's temporary table from standing in for api_tokens.
    conn.exec_driver_sql(f"""CREATE FUNCTION {schema}.cardloop_token_tenant(token_hash text, used_at timestamptz)
    RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = {schema}, pg_temp AS $fn$
DECLARE
    found_id varchar;
    found_tenant varchar;
BEGIN
    SELECT id, tenant INTO found_id, found_tenant
      FROM {schema}.api_tokens WHERE token_sha256 = token_hash AND revoked_at IS NULL;
    IF found_id IS NULL THEN
        RETURN NULL;
    END IF;
    -- At most one write a minute per token: authentication stays a read on the hot path.
    UPDATE {schema}.api_tokens SET last_used_at = used_at
     WHERE id = found_id AND (last_used_at IS NULL OR last_used_at <= used_at - interval '1 minute');
    RETURN found_tenant;
END
$fn$""")
    conn.exec_driver_sql(f"REVOKE ALL ON FUNCTION {schema}.cardloop_token_tenant(text, timestamptz) FROM PUBLIC")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "cards, chat history, context, blobs, summaries, LLM usage, deliveries", _V1),
    Migration(2, "tenant prompts (versioned), API tokens, row-level security", (*_V2_TABLES, _v2_row_level_security)),
    Migration(3, "the card workflow's state when a run closes", ("ALTER TABLE cards ADD COLUMN workflow_state TEXT",)),
    Migration(4, "keys scoped by tenant, card keys under their tenant's prefix, blobs per tenant only",
              (scope_keys_by_tenant,)),
    Migration(5, "a ledger row per provider call attempt; recorded side effects", V5),
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
    # Only when missing: even IF NOT EXISTS needs CREATE on the schema, which the application
    # role of a provisioned database lacks (it opens an up-to-date store without migrating).
    if not inspect(conn).has_table(schema_versions.name):
        conn.exec_driver_sql(_SCHEMA_TABLE_DDL.format(**_TYPES[conn.dialect.name]))
    applied = set(conn.execute(select(schema_versions.c.version)).scalars())
    newest = max(applied, default=0)
    if newest > known:
        raise StoreError(
            f"the store at {db.masked_url} has schema version {newest}, newer than this cardloop knows "
            f"(up to {known}): it was migrated by a newer release. Upgrade cardloop, or use another database."
        )
    return applied


# ---------------------------------------------------------------------------------------------
# The application role (PostgreSQL)

# Immutable history: the application may add prompt versions, never change or remove one.
_APP_GRANTS: tuple[tuple[str, str], ...] = (
    ("cardloop_schema", "SELECT"),
    ("cards", "SELECT, INSERT, UPDATE, DELETE"),
    ("card_counters", "SELECT, INSERT, UPDATE, DELETE"),
    ("messages", "SELECT, INSERT, UPDATE, DELETE"),
    ("context_items", "SELECT, INSERT, UPDATE, DELETE"),
    ("blobs", "SELECT, INSERT, UPDATE, DELETE"),
    ("summaries", "SELECT, INSERT, UPDATE, DELETE"),
    ("llm_usage", "SELECT, INSERT, UPDATE, DELETE"),
    ("deliveries", "SELECT, INSERT, UPDATE, DELETE"),
    ("effects", "SELECT, INSERT"),
    ("tenant_prompts", "SELECT, INSERT"),
    ("tenant_prompt_heads", "SELECT, INSERT, UPDATE"),
    ("api_tokens", "SELECT, INSERT, UPDATE"),
)


def provision_role_sql(conn: Connection, role: str) -> list[str]:
    """The statements that let `role` use the migrated schema of `conn` as the application.

    Run by the owner (the role that migrated). Idempotent. What the role does NOT get: CREATE on
    the schema (it cannot migrate or create objects), ownership (FORCEd row-level security still
    binds it, but so does plain RLS), BYPASSRLS, UPDATE/DELETE on tenant_prompts.
    """
    quote = conn.dialect.identifier_preparer.quote
    schema = quote(conn.execute(text("SELECT current_schema()")).scalar_one())
    r = quote(role)
    existing = set(inspect(conn).get_table_names())  # a store not yet migrated has fewer tables
    statements = [f"GRANT USAGE ON SCHEMA {schema} TO {r}"]
    statements += [f"GRANT {privileges} ON {schema}.{table} TO {r}" for table, privileges in _APP_GRANTS
                   if table in existing]
    statements.append(
        f"GRANT EXECUTE ON FUNCTION {schema}.{TOKEN_LOOKUP_FUNCTION}(text, timestamptz) TO {r}"
    )
    return statements
