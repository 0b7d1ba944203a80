"""Migration 5: a ledger row per provider call *attempt*, and recorded side effects.

`llm_usage` was keyed by call key alone, so a retried call (a worker that died mid-call, a
zombie attempt whose heartbeat stopped) was never billed. Now the key is (tenant, card_key,
call_key, attempt)
and each row says whether it is a retry, whether its result is the one the store kept
(`kept`: the turn's own usage) and where the call stands (`status`: calling, done, failed).
Rows from before keep their values as attempt 1, done, kept.

`effects` holds the result of a side effect under its key (a summary chunk today; tool calls,
pushes, PRs and comments later): the first result recorded wins, and every later attempt of
the same activity returns it instead of acting again (activities/once.py).

Kept apart from migrations.py so the DDL of one change reads as one piece; migrations.py lists it in
MIGRATIONS and describes the tables as they are after it.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect

from cardloop.store.tenant_keys import card_key_policy

_USAGE_COLUMNS = (
    "call_key, card_key, tenant, stage, profile, provider, model, purpose, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, cost_nanousd, created_at, inserted_at"
)

_SQLITE_USAGE = """CREATE TABLE llm_usage_v5 (
    call_key VARCHAR(500) NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    card_key VARCHAR(500) NOT NULL,
    tenant VARCHAR(100) NOT NULL,
    stage VARCHAR(64) NOT NULL,
    profile VARCHAR(100) NOT NULL,
    provider VARCHAR(64) NOT NULL,
    model VARCHAR(200) NOT NULL,
    purpose VARCHAR(16) NOT NULL,
    retry BOOLEAN NOT NULL DEFAULT 0,
    kept BOOLEAN NOT NULL DEFAULT 1,
    status VARCHAR(16) NOT NULL DEFAULT 'done',
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    cost_nanousd BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    inserted_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT pk_llm_usage PRIMARY KEY (tenant, card_key, call_key, attempt)
)"""


def _ledger_per_attempt(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        for column in ("attempt INTEGER NOT NULL DEFAULT 1", "retry BOOLEAN NOT NULL DEFAULT FALSE",
                       "kept BOOLEAN NOT NULL DEFAULT TRUE", "status VARCHAR(16) NOT NULL DEFAULT 'done'"):
            conn.exec_driver_sql(f"ALTER TABLE llm_usage ADD COLUMN {column}")
        # Row-level security, its policy and the application role's grants stay with the table.
        old = inspect(conn).get_pk_constraint("llm_usage")["name"]  # pk_llm_usage since migration 4
        conn.exec_driver_sql(f'ALTER TABLE llm_usage DROP CONSTRAINT "{old}"')
        conn.exec_driver_sql(
            "ALTER TABLE llm_usage ADD CONSTRAINT pk_llm_usage PRIMARY KEY (tenant, card_key, call_key, attempt)")
    else:
        # SQLite cannot change a primary key in place: copy into the new shape (one transaction).
        conn.exec_driver_sql(_SQLITE_USAGE)
        conn.exec_driver_sql(f"INSERT INTO llm_usage_v5 ({_USAGE_COLUMNS}) SELECT {_USAGE_COLUMNS} FROM llm_usage")
        conn.exec_driver_sql("DROP TABLE llm_usage")
        conn.exec_driver_sql("ALTER TABLE llm_usage_v5 RENAME TO llm_usage")
        conn.exec_driver_sql("CREATE INDEX ix_llm_usage_card ON llm_usage (card_key, stage)")
        conn.exec_driver_sql("CREATE INDEX ix_llm_usage_tenant_time ON llm_usage (tenant, created_at)")


def _effects_row_level_security(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql("ALTER TABLE effects ENABLE ROW LEVEL SECURITY")
    conn.exec_driver_sql("ALTER TABLE effects FORCE ROW LEVEL SECURITY")
    conn.exec_driver_sql(card_key_policy("effects"))
    # Application roles provisioned before this migration get the new table too, so an upgrade
    # needs no re-provisioning: every role that may read the ledger may read and add effects.
    roles = conn.exec_driver_sql(
        "SELECT DISTINCT grantee FROM information_schema.role_table_grants "
        "WHERE table_schema = current_schema() AND table_name = 'llm_usage' AND privilege_type = 'SELECT' "
        "AND grantee <> current_user").scalars().all()
    quote = conn.dialect.identifier_preparer.quote
    for role in roles:
        conn.exec_driver_sql(f"GRANT SELECT, INSERT ON effects TO {quote(role)}")


V5 = (
    _ledger_per_attempt,
    """CREATE TABLE effects (
        card_key VARCHAR(500) NOT NULL,
        effect_key VARCHAR(500) NOT NULL,
        tenant VARCHAR(100) NOT NULL,
        kind VARCHAR(64) NOT NULL,
        result TEXT NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_effects PRIMARY KEY (tenant, card_key, effect_key)
    )""",
    _effects_row_level_security,
)
