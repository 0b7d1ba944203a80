"""The versioned migrations that create the tables of schema.py, and the application role.

A migration is frozen once released; the tables in schema.py move on. Each migration runs in
its own transaction together with the insert of its version into `cardloop_schema`, so it is
applied completely or not at all (a new store gets all of them in one transaction); concurrent
openers wait on a lock and apply each version once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, func, inspect, select, text

from cardloop.store.engine import Database
from cardloop.store.migration_ledger import V5
from cardloop.store.migration_research import V8
from cardloop.store.schema import TOKEN_LOOKUP_FUNCTION, schema_versions
from cardloop.store.tenant_keys import card_key_policy, scope_keys_by_tenant
from cardloop.store.values import StoreError

log = logging.getLogger(__name__)

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


def _usage_hours_row_level_security(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql("ALTER TABLE usage_hours ENABLE ROW LEVEL SECURITY")
    conn.exec_driver_sql("ALTER TABLE usage_hours FORCE ROW LEVEL SECURITY")
    conn.exec_driver_sql(_TENANT_POLICY.format(table="usage_hours"))
    # Roles provisioned before this migration get the table too: whoever writes the ledger checks limits.
    roles = conn.exec_driver_sql(
        "SELECT DISTINCT grantee FROM information_schema.role_table_grants "
        "WHERE table_schema = current_schema() AND table_name = 'llm_usage' AND privilege_type = 'INSERT' "
        "AND grantee <> current_user").scalars().all()
    quote = conn.dialect.identifier_preparer.quote
    for role in roles:
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE ON usage_hours TO {quote(role)}")


_V7 = (
    """CREATE TABLE usage_hours (
        tenant VARCHAR(100) NOT NULL,
        scope VARCHAR(40) NOT NULL,
        hour {timestamp} NOT NULL,
        tokens BIGINT NOT NULL,
        cost_nanousd BIGINT NOT NULL,
        CONSTRAINT pk_usage_hours PRIMARY KEY (tenant, scope, hour)
    )""",
    _usage_hours_row_level_security,
)


def _grant_to_app_roles(conn: Connection, table: str, privileges: str) -> None:
    """Roles provisioned before a migration that adds `table` get it too: the application role
    that inserts cards (found by its grant on `cards`) reads and writes the new table."""
    roles = conn.exec_driver_sql(
        "SELECT DISTINCT grantee FROM information_schema.role_table_grants "
        "WHERE table_schema = current_schema() AND table_name = 'cards' AND privilege_type = 'INSERT' "
        "AND grantee <> current_user").scalars().all()
    quote = conn.dialect.identifier_preparer.quote
    for role in roles:
        conn.exec_driver_sql(f"GRANT {privileges} ON {table} TO {quote(role)}")


def _card_aliases_row_level_security(conn: Connection) -> None:
    _card_keyed_row_level_security(conn, "card_aliases")


def _card_board_items_row_level_security(conn: Connection) -> None:
    _card_keyed_row_level_security(conn, "card_board_items")


def _card_keyed_row_level_security(conn: Connection, table: str) -> None:
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    conn.exec_driver_sql(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    # As on the card tables: the tenant's scope, and the card it leads to under the tenant's prefix.
    conn.exec_driver_sql(card_key_policy(table))
    _grant_to_app_roles(conn, table, "SELECT, INSERT, UPDATE")


_V12 = (
    """CREATE TABLE card_aliases (
        tenant VARCHAR(100) NOT NULL,
        board VARCHAR(100) NOT NULL,
        kind VARCHAR(8) NOT NULL,
        value VARCHAR(300) NOT NULL,
        card_key VARCHAR(500) NOT NULL,
        named_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_card_aliases PRIMARY KEY (tenant, board, kind, value),
        CONSTRAINT ck_card_aliases_kind CHECK (kind IN ('uid', 'name'))
    )""",
    "CREATE INDEX ix_card_aliases_card ON card_aliases (tenant, card_key)",
    _card_aliases_row_level_security,
)

# Additive: a new table (nothing existing changes), its own row-level security on PostgreSQL.
_V13 = (
    """CREATE TABLE card_board_items (
        tenant VARCHAR(100) NOT NULL,
        board VARCHAR(100) NOT NULL,
        item VARCHAR(300) NOT NULL,
        card_key VARCHAR(500) NOT NULL,
        seen_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_card_board_items PRIMARY KEY (tenant, board, item)
    )""",
    "CREATE INDEX ix_card_board_items_card ON card_board_items (tenant, card_key)",
    _card_board_items_row_level_security,
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "cards, chat history, context, blobs, summaries, LLM usage, deliveries", _V1),
    Migration(2, "tenant prompts (versioned), API tokens, row-level security", (*_V2_TABLES, _v2_row_level_security)),
    Migration(3, "the card workflow's state when a run closes", ("ALTER TABLE cards ADD COLUMN workflow_state TEXT",)),
    Migration(4, "keys scoped by tenant, card keys under their tenant's prefix, blobs per tenant only",
              (scope_keys_by_tenant,)),
    Migration(5, "a ledger row per provider call attempt; recorded side effects", V5),
    Migration(6, "spend limits: the API token of a gateway call and a refused call's reason in the ledger", (
        "ALTER TABLE llm_usage ADD COLUMN token_id VARCHAR(40)",
        "ALTER TABLE llm_usage ADD COLUMN note VARCHAR(500)",
        "CREATE INDEX ix_llm_usage_token_time ON llm_usage (tenant, token_id, created_at)",
    )),
    Migration(7, "hourly sums of the ledger for the spend limits' day and month windows", _V7),
    Migration(8, "research buffers and their chunks", V8),
    Migration(9, "tenant prompts: the guard model's verdict and reason, when one read the prompt", (
        "ALTER TABLE tenant_prompts ADD COLUMN guard_verdict VARCHAR(16)",
        "ALTER TABLE tenant_prompts ADD COLUMN guard_reason VARCHAR(500)",
        "ALTER TABLE tenant_prompts ADD COLUMN guard_model VARCHAR(200)",
    )),
    Migration(10, "spend limits: the tokens and cost a running call reserves against the caps", (
        "ALTER TABLE llm_usage ADD COLUMN reserved_tokens BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE llm_usage ADD COLUMN reserved_nanousd BIGINT NOT NULL DEFAULT 0",
    )),
    Migration(11, "cards archived or deleted on their board: what the board said, and when", (
        "ALTER TABLE cards ADD COLUMN gone VARCHAR(500)",
        "ALTER TABLE cards ADD COLUMN gone_at {timestamp}",
    )),
    Migration(12, "a card's stable board id and the names it had on its board (moved to another team or project)",
              _V12),
    Migration(13, "the board items that held a card (a GitHub project item keeps its id when its issue is "
                  "transferred)", _V13),
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
        if not applied:
            # A new store: every migration in this one transaction, all or nothing. A lock and
            # a read of the versions per migration were a third of the statements that opening
            # a new store ran (about 150, 55 ms on SQLite), and no release is half-applied.
            for migration in migrations:
                _apply(conn, migration)
    if not applied:
        for migration in migrations:
            log.info("store %s: applied migration %d (%s)", db.masked_url, migration.version, migration.description)
        return [m.version for m in migrations]
    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        with db.write() as conn:
            applied = _lock_and_read_versions(conn, db, known)
            if migration.version in applied:
                continue
            _apply(conn, migration)
        log.info("store %s: applied migration %d (%s)", db.masked_url, migration.version, migration.description)
        done.append(migration.version)
    return done


def _apply(conn: Connection, migration: Migration) -> None:
    migration.apply(conn)
    conn.execute(schema_versions.insert().values(version=migration.version, description=migration.description))


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
    ("usage_hours", "SELECT, INSERT, UPDATE"),
    ("research_buffers", "SELECT, INSERT"),
    ("research_chunks", "SELECT, INSERT"),
    ("card_aliases", "SELECT, INSERT, UPDATE"),
    ("card_board_items", "SELECT, INSERT, UPDATE"),
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
