"""Migration "tenant-scoped keys": every key is unique per tenant, and a card key must sit
under its own tenant's prefix.

Before it, the primary keys of the card tables were the card key alone and the row-level
security policy only compared the `tenant` column. An application role scoped to tenant B
could therefore insert a row keyed `acme/...` with tenant B: the policy let it in, and then

- acme's own upsert of that card failed (the key was taken by a row acme cannot see), and
- the duplicate-key error told B that acme had a card with that key.

Blobs had a second hole: a SELECT policy opened any blob whose content hash a transaction
named (`cardloop.blob_ref`), so whoever could guess a hash (the hash of a known log, a known
prompt) could confirm that another tenant stored it and read it.

After it:

- the primary key (and the dedup unique key of messages) of every keyed table starts with
  `tenant`, so two tenants' keys never collide and a duplicate says nothing about another
  tenant;
- on PostgreSQL the policy of each card-keyed table also requires the key to start with the
  row's tenant and "/" (`left(card_key, length(tenant) + 1) = tenant || '/'`), for reads and
  writes, so a row under another tenant's prefix cannot be written at all;
- blobs are content-addressed per tenant (primary key (tenant, ref)), the read-by-ref policy
  is gone, and a blob is read only inside its tenant's scope (`Store.get_blob(ref, tenant=...)`).

The migration is self-contained (it reads the tables as they are, so a column another
migration added is kept): on PostgreSQL it swaps constraints and policies in place (grants,
row-level security flags and data stay); SQLite cannot change a primary key, so each table is
rebuilt from its own column list, rows copied, and its indexes re-created.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

# table -> (new primary key, {unique constraint name: columns}); every key starts with tenant.
TENANT_KEYS: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "cards": (("tenant", "card_key"), {}),
    "card_counters": (("tenant", "card_key"), {}),
    "messages": (("tenant", "card_key", "seq"), {"uq_messages_dedup": ("tenant", "card_key", "dedup_key")}),
    "context_items": (("tenant", "card_key", "ord"), {}),
    "summaries": (("tenant", "card_key", "model", "first_seq", "last_seq"), {}),
    "llm_usage": (("tenant", "call_key"), {}),
    "blobs": (("tenant", "ref"), {}),
}
# Tables whose card_key must start with "<tenant>/" (checked by their row-level security policy).
CARD_KEYED: tuple[str, ...] = ("cards", "card_counters", "messages", "context_items", "summaries", "llm_usage")
# (card_aliases, migration 12, and card_board_items, migration 13, get the same policy as they are
# created: migrations.py.)

_OWN_PREFIX = "left(card_key, length(tenant) + 1) = tenant || '/'"
_SCOPED = "tenant = current_setting('cardloop.tenant', true)"


def card_key_policy(table: str) -> str:
    return (f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({_SCOPED} AND {_OWN_PREFIX}) WITH CHECK ({_SCOPED} AND {_OWN_PREFIX})")


def scope_keys_by_tenant(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        _postgres(conn)
    else:
        for table, (key, uniques) in TENANT_KEYS.items():
            _rebuild_sqlite(conn, table, key, uniques)


def _postgres(conn: Connection) -> None:
    inspector = inspect(conn)
    for table, (key, uniques) in TENANT_KEYS.items():
        old = inspector.get_pk_constraint(table)["name"]
        conn.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{old}"')
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY ({', '.join(key)})")
        for name, columns in uniques.items():
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE ({', '.join(columns)})")
    for table in CARD_KEYED:
        conn.exec_driver_sql(f"DROP POLICY tenant_isolation ON {table}")
        conn.exec_driver_sql(card_key_policy(table))
    conn.exec_driver_sql("DROP POLICY read_by_ref ON blobs")


def _rebuild_sqlite(conn: Connection, table: str, key: tuple[str, ...], uniques: dict[str, tuple[str, ...]]) -> None:
    columns = conn.exec_driver_sql(f"PRAGMA table_info({table})").all()  # cid, name, type, notnull, default, pk
    indexes = [row[0] for row in conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,))]
    parts = []
    for _, name, type_, notnull, default, _pk in columns:
        definition = f"{name} {type_}"
        if notnull or name in key:
            definition += " NOT NULL"
        if default is not None:
            definition += f" DEFAULT {default}"
        parts.append(definition)
    parts.append(f"CONSTRAINT pk_{table} PRIMARY KEY ({', '.join(key)})")
    parts += [f"CONSTRAINT {name} UNIQUE ({', '.join(cols)})" for name, cols in uniques.items()]
    names = ", ".join(row[1] for row in columns)
    conn.exec_driver_sql(f"CREATE TABLE {table}__rekeyed ({', '.join(parts)})")
    conn.exec_driver_sql(f"INSERT INTO {table}__rekeyed ({names}) SELECT {names} FROM {table}")
    conn.exec_driver_sql(f"DROP TABLE {table}")  # its indexes go with it
    conn.exec_driver_sql(f"ALTER TABLE {table}__rekeyed RENAME TO {table}")
    for statement in indexes:
        conn.execute(text(statement))
