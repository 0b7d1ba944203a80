"""What every part of the Store shares: the engine, the tenant a call acts for, and the SQL
helpers that keep writes idempotent on SQLite and PostgreSQL alike.

The Store (core.py) is one mixin per concern (cards.py, context.py, blobs.py, ...); each mixin
subclasses StoreBase, so it reaches these helpers without depending on another concern."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, select
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ClauseElement

from cardloop.store import schema as s
from cardloop.store.engine import Database
from cardloop.store.sealing import BlobSealer
from cardloop.store.values import StoreError, TenantScopeError, tenant_of

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite


class StoreBase:
    """The state the Store's parts share; `Store.__init__` (core.py) sets it."""

    _db: Database
    _scope: str | None  # set on the views for_tenant returns
    _sealer: BlobSealer | None  # blob contents encrypted at rest (store/sealing.py); None: plain
    # The time written to tenant prompt versions and tokens; tests move it.
    clock: Callable[[], datetime]

    def _tenant(self, tenant: str) -> str:
        """The tenant a call acts for, which a scoped view only allows to be its own."""
        if self._scope is not None and tenant != self._scope:
            raise TenantScopeError(
                f"this store is scoped to tenant {self._scope!r}; refusing to touch tenant {tenant!r}"
            )
        return tenant

    def _card_tenant(self, card_key: str) -> str:
        return self._tenant(tenant_of(card_key))

    def _insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        # Each dialect's module is imported by the store that uses it: PostgreSQL's (about 20 ms)
        # is start-up time every command on the default SQLite store would pay for nothing.
        if self._db.dialect == "postgresql":
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def _upsert(self, table: Table, keys: tuple[str, ...], update: tuple[str, ...],
                extra: Mapping[str, Any] | None = None) -> Insert:
        """INSERT .. ON CONFLICT (keys) DO UPDATE the `update` columns from the new row (plus
        `extra`), built once per store and executed with the row as parameters: building
        `excluded` (an alias of every column) each call cost a third of a millisecond per write."""
        # The statement is cached by column names: `extra` must hold SQL expressions evaluated at
        # execution (CURRENT_TIMESTAMP), never Python values, which the first call would freeze.
        if extra and not all(isinstance(v, ClauseElement) for v in extra.values()):
            raise TypeError("_upsert extra values must be SQL expressions; pass row values as parameters")
        cache: dict[tuple[Any, ...], Insert] = self.__dict__.setdefault("_upserts", {})
        cache_key = (table.name, keys, update, tuple(extra or ()))
        stmt = cache.get(cache_key)
        if stmt is None:
            insert = self._insert(table)
            stmt = cache[cache_key] = insert.on_conflict_do_update(
                index_elements=[table.c[k] for k in keys],
                set_={name: insert.excluded[name] for name in update} | dict(extra or {}))
        return stmt

    def _insert_new(self, conn: Connection, table: Table, values: Mapping[str, Any]) -> bool:
        # RETURNING, not rowcount: an INSERT's rowcount is not kept by every driver (psycopg
        # under SQLAlchemy 2.1 reports -1), while a returned row is proof on both databases.
        stmt: Insert = self._insert(table).values(**values).on_conflict_do_nothing()
        return conn.execute(stmt.returning(*table.primary_key.columns)).first() is not None

    def _lock_counter(self, conn: Connection, card_key: str, tenant: str) -> tuple[int, int]:
        """Lock the card's counter row (creating it) for this transaction; return its values."""
        c = s.card_counters.c
        conn.execute(
            self._insert(s.card_counters)
            .values(card_key=card_key, tenant=tenant)
            .on_conflict_do_nothing(index_elements=[c.tenant, c.card_key])
        )
        # FOR UPDATE queues concurrent writers on PostgreSQL; SQLite is already serialized by
        # BEGIN IMMEDIATE (SQLAlchemy leaves FOR UPDATE out there).
        row = conn.execute(
            select(c.next_message_seq, c.next_context_ord)
            .where(c.card_key == card_key, c.tenant == tenant)
            .with_for_update()
        ).one()
        return int(row.next_message_seq), int(row.next_context_ord)


def check_text(name: str, value: str | None, limit: int, *, required: bool = False) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value or len(value) > limit:
        # A value far over the limit is not echoed whole: the message stays one readable line.
        long = isinstance(value, str) and len(value) > 80
        said = f"{value[:60]!r}… ({len(value):,} characters)" if long else repr(value)
        raise StoreError(f"{name} {said}: expected a non-empty string of at most {limit} characters")


def check_range(first: int, last: int) -> None:
    if not 0 <= first <= last:
        raise StoreError(f"summary range {first}..{last}: expected 0 <= first <= last (inclusive message seqs)")
