"""Opening the database: URL rules, SQLite settings and the two kinds of transaction.

Store methods run in Temporal sync activities on a thread pool, so one Engine is shared by
many threads. Each call checks a connection out of the pool for one transaction:

- SQLite file: WAL (readers never wait for the writer), a busy timeout (writers queue instead
  of failing; 30 s, or `?busy_timeout_ms=N` in the URL; past it the store raises
  StoreUnavailable "store unavailable: database is locked"), `check_same_thread=False`
  (pooled connections move between threads), and
  write transactions begin IMMEDIATE so they take the write lock before their first read.
- `sqlite://` (in memory): one shared connection (StaticPool) — the only way the threads see
  the same database — so every transaction is serialized by a lock in `Database`.
- PostgreSQL: a normal QueuePool with pre-ping; psycopg 3 is the only driver.

On PostgreSQL a transaction may be *scoped*: `write(tenant)` / `read(tenant)` first run
`set_config('cardloop.tenant', tenant, true)`, which the row-level security policies of the
tenant tables compare with each row's `tenant` (see schema.py). The setting is transaction-local,
so it is gone at commit or rollback and a pooled connection never carries it to the next user.
SQLite has no row-level security: there the store's queries filter by tenant themselves.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import StaticPool

from cardloop.store.values import StoreError, StoreUnavailable

SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE = "cardloop_write"
# The settings the row-level security policies read (schema.py); transaction-local.
TENANT_SETTING = "cardloop.tenant"
_SUPPORTED = "sqlite:///path/to/file.sqlite, sqlite:// (in memory) or postgresql://user@host:5432/db"


# Query parameters libpq and the drivers read a secret from (`?password=`, `?sslpassword=`).
_SECRET_QUERY = ("password", "sslpassword", "passfile")


def mask(url: URL) -> str:
    """The URL as logs and errors may show it: the password hidden, in the userinfo or the query."""
    secret = {k: "***" for k in url.query if k.lower() in _SECRET_QUERY}
    return (url.update_query_dict(secret) if secret else url).render_as_string(hide_password=True)


def normalize_url(url: str) -> URL:
    """Parse a store URL and pin the driver; StoreError (without the password) when unusable."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        # The text could not be parsed, so it cannot be masked either: never echo it.
        raise StoreError(f"the store URL is not a database URL; expected {_SUPPORTED}") from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        return parsed.set(drivername="sqlite+pysqlite")
    # postgres:// is what Heroku-style platforms hand out; plain postgresql:// would pick psycopg2.
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        return parsed.set(drivername="postgresql+psycopg")
    raise StoreError(f"unsupported store URL scheme {parsed.drivername!r} in {mask(parsed)}; expected {_SUPPORTED}")


@dataclass
class Database:
    """An Engine plus what the store needs to know about it; `write()`/`read()` give transactions."""

    engine: Engine
    url: URL
    in_memory: bool
    _serial: contextlib.AbstractContextManager[Any] = field(default_factory=contextlib.nullcontext, repr=False)

    @property
    def dialect(self) -> Literal["sqlite", "postgresql"]:
        return "postgresql" if self.engine.dialect.name == "postgresql" else "sqlite"

    @property
    def masked_url(self) -> str:
        return mask(self.url)

    @contextlib.contextmanager
    def write(self, tenant: str | None = None) -> Iterator[Connection]:
        """A transaction that will write: committed on normal exit, rolled back on an exception.

        `tenant` scopes it for row-level security (PostgreSQL); without one, the tenant tables
        show no rows and accept no writes to a role that row-level security applies to.
        """
        with self._unavailable(), self._serial, self.engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                self._scope(conn, tenant)
                yield conn

    @contextlib.contextmanager
    def read(self, tenant: str | None = None) -> Iterator[Connection]:
        """A read-only transaction: one consistent snapshot for several SELECTs; scoped as `write`."""
        with self._unavailable(), self._serial, self.engine.connect() as conn:
            if self.dialect == "postgresql":
                # READ COMMITTED takes a new snapshot per statement: a card read in three SELECTs
                # could mix two appends. A read-only REPEATABLE READ transaction never fails.
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                self._scope(conn, tenant)
                yield conn

    @contextlib.contextmanager
    def _unavailable(self) -> Iterator[None]:
        """A database that cannot answer now becomes StoreUnavailable, which callers recognise:
        SQLite locked past its busy timeout, PostgreSQL unreachable or its connection lost."""
        try:
            yield
        except OperationalError as exc:
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
            if self.dialect == "sqlite" and "locked" not in reason and "busy" not in reason:
                raise  # e.g. a malformed database: not something waiting fixes
            raise StoreUnavailable(f"store unavailable: {reason}") from exc

    def _scope(self, conn: Connection, tenant: str | None) -> None:
        if self.dialect != "postgresql" or tenant is None:
            return
        # is_local=true: the value ends with this transaction, whatever way it ends.
        conn.execute(text("SELECT set_config(:tn, :t, true)"), {"tn": TENANT_SETTING, "t": tenant})

    def dispose(self) -> None:
        self.engine.dispose()


def open_database(url: str) -> Database:
    parsed = normalize_url(url)
    if parsed.drivername.startswith("sqlite"):
        return _open_sqlite(parsed)
    return _open_postgres(parsed)


def _open_sqlite(url: URL) -> Database:
    database = url.database or ""
    in_memory = database in ("", ":memory:")
    if in_memory:
        engine = create_engine(url.set(database=None), poolclass=StaticPool, connect_args={"check_same_thread": False})
        _sqlite_hooks(engine, wal=False)
        _text_without_nul(engine)
        # One connection shared by all threads: two interleaved transactions on it would mix.
        return Database(engine, url, in_memory=True, _serial=threading.RLock())
    path = Path(database).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    busy_ms = SQLITE_BUSY_TIMEOUT_MS
    if "busy_timeout_ms" in url.query:
        raw = url.query["busy_timeout_ms"]
        try:
            busy_ms = int(raw if isinstance(raw, str) else raw[-1])
        except ValueError:
            raise StoreError(f"busy_timeout_ms={raw!r} in the store URL: expected milliseconds") from None
        if busy_ms < 0:
            raise StoreError(f"busy_timeout_ms={busy_ms} in the store URL: expected milliseconds >= 0")
    url = url.set(database=str(path)).difference_update_query(["busy_timeout_ms"])
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": busy_ms / 1000},
        pool_size=8,
        max_overflow=24,
    )
    _sqlite_hooks(engine, wal=True, busy_ms=busy_ms)
    _text_without_nul(engine)
    return Database(engine, url, in_memory=False)


def _enable_wal(cursor: Any, busy_ms: int) -> None:
    """WAL is a property of the file, set once. Switching needs an exclusive lock, and SQLite
    does not call its busy handler for it: two stores opening a new file at the same moment
    see "database is locked" at once. So wait for the other opener here, up to the busy timeout."""
    deadline = time.monotonic() + busy_ms / 1000
    while True:
        if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_hooks(engine: Engine, *, wal: bool, busy_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # sqlite3's own transaction handling skips BEGIN before SELECT and DDL, which breaks
        # read snapshots and transactional migrations; we emit BEGIN ourselves (below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            if wal:
                _enable_wal(cursor, busy_ms)
                # In WAL mode NORMAL loses no committed data on an application crash, and skips an fsync per commit.
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # A deferred transaction that reads and then writes cannot wait for a concurrent writer:
        # in WAL mode it fails at once with SQLITE_BUSY. IMMEDIATE queues on busy_timeout instead.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def _open_postgres(url: URL) -> Database:
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = 10
    engine = create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=24, connect_args=connect_args)
    _text_without_nul(engine)
    return Database(engine, url, in_memory=False)


# PostgreSQL text cannot hold NUL: psycopg refuses the whole statement ("PostgreSQL text fields
# cannot contain NUL (0x00) bytes"). Text reaches the store from senders (a board's comment or
# actor, a token's name or id in a URL), so a NUL in one was an unhandled error (500) on
# PostgreSQL and kept as is on SQLite. Both now store U+FFFD in its place, as a decoder marks a
# byte it cannot read: the rest of the text is kept, and both backends hold the same thing (a
# lookup by a key with a NUL finds nothing: no key the store wrote has one). Bytes columns
# (blobs, research chunks) are not text and keep their NULs.
NUL, NUL_REPLACEMENT = "\x00", "\ufffd"


def without_nul(params: Any) -> Any:
    """`params` as the driver gets them (a mapping, a sequence of values, or a list of either for
    executemany) with NUL in every string replaced; the same object when none has one."""
    if isinstance(params, str):
        return params.replace(NUL, NUL_REPLACEMENT) if NUL in params else params
    if isinstance(params, dict):
        if not any(isinstance(v, str | dict | list | tuple) for v in params.values()):
            return params
        return {key: without_nul(value) for key, value in params.items()}
    if isinstance(params, list | tuple):
        return type(params)(without_nul(value) for value in params)
    return params


def _text_without_nul(engine: Engine) -> None:
    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _replace_nul(conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any,
                     executemany: bool) -> tuple[str, Any]:
        return statement, without_nul(parameters)
