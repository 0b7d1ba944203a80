"""Migration 8: research buffers and their chunks (issue 14).

A buffer is an artifact stored for research (a whole CI or pod log: its text is a blob), named
and numbered per card; its chunks are spans of that text (line and character offsets), so a
chunk's text is read from the blob and never stored twice. Both tables are card-keyed: on
PostgreSQL the card-key policy of migration 4 isolates them like the effects table."""

from __future__ import annotations

from sqlalchemy import Connection

from cardloop.store.tenant_keys import card_key_policy

TABLES = ("research_buffers", "research_chunks")


def _row_level_security(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    roles = conn.exec_driver_sql(
        "SELECT DISTINCT grantee FROM information_schema.role_table_grants "
        "WHERE table_schema = current_schema() AND table_name = 'effects' AND privilege_type = 'SELECT' "
        "AND grantee <> current_user").scalars().all()
    quote = conn.dialect.identifier_preparer.quote
    for table in TABLES:
        conn.exec_driver_sql(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        conn.exec_driver_sql(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        conn.exec_driver_sql(card_key_policy(table))
        # Roles provisioned before this migration get the new tables, like the effects table's.
        for role in roles:
            conn.exec_driver_sql(f"GRANT SELECT, INSERT ON {table} TO {quote(role)}")


V8 = (
    """CREATE TABLE research_buffers (
        tenant VARCHAR(100) NOT NULL,
        card_key VARCHAR(500) NOT NULL,
        buffer_id INTEGER NOT NULL,
        name VARCHAR(500) NOT NULL,
        blob_ref VARCHAR(80) NOT NULL,
        size BIGINT NOT NULL,
        lines BIGINT NOT NULL,
        tokens BIGINT NOT NULL,
        chunk_tokens INTEGER NOT NULL,
        overlap_lines INTEGER NOT NULL,
        inserted_at {timestamp} NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT pk_research_buffers PRIMARY KEY (tenant, card_key, buffer_id),
        CONSTRAINT uq_research_buffers_content UNIQUE (tenant, card_key, name, blob_ref, chunk_tokens, overlap_lines)
    )""",
    """CREATE TABLE research_chunks (
        tenant VARCHAR(100) NOT NULL,
        card_key VARCHAR(500) NOT NULL,
        chunk_id INTEGER NOT NULL,
        buffer_id INTEGER NOT NULL,
        first_line BIGINT NOT NULL,
        last_line BIGINT NOT NULL,
        start_char BIGINT NOT NULL,
        end_char BIGINT NOT NULL,
        tokens INTEGER NOT NULL,
        CONSTRAINT pk_research_chunks PRIMARY KEY (tenant, card_key, chunk_id)
    )""",
    "CREATE INDEX ix_research_chunks_buffer ON research_chunks (tenant, card_key, buffer_id)",
    _row_level_security,
)
