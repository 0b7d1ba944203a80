"""The Store: cards, chat history, context, blobs, summaries, LLM usage, deliveries, tenant
prompts and API tokens, one mixin module per concern; this module opens, migrates and scopes it.

Tenant scoping. Every transaction names the tenant it acts for; on PostgreSQL that is what
row-level security compares each row with (schema.py), on SQLite the queries filter by it.

- The plain Store (workers, CardService, the CLI) takes the tenant from each call: the tenant
  segment of the card key, `put_blob(tenant, ...)`, `UsageRecord.tenant`, the tenant argument of
  the prompt and token methods. `get_blob(ref, tenant=...)` reads that tenant's copy, never another's.
- `store.for_tenant(t)` is a view for code serving one tenant (the tenant API): the same methods
  on the same engine, every transaction scoped to `t`, and any call naming another tenant
  refused with TenantScopeError before the database is asked.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from types import TracebackType

from sqlalchemy import Engine
from sqlalchemy.exc import DatabaseError, OperationalError, ProgrammingError

from cardloop.contracts.keyring import KeyRing
from cardloop.store import migrations
from cardloop.store.aliases import CardAliasesMixin
from cardloop.store.blobs import BlobsMixin
from cardloop.store.cards import CardsMixin
from cardloop.store.context import ContextMixin
from cardloop.store.deliveries import DeliveriesMixin
from cardloop.store.engine import open_database
from cardloop.store.ledger import LedgerMixin
from cardloop.store.limits import LimitsMixin
from cardloop.store.reseal import ResealMixin
from cardloop.store.research import ResearchMixin
from cardloop.store.roles import provision, scram_sha256_verifier
from cardloop.store.sealing import BlobSealer
from cardloop.store.summaries import SummariesMixin
from cardloop.store.tenant_prompts import TenantPromptsMixin
from cardloop.store.tokens import TOKEN_PREFIX, ApiTokensMixin
from cardloop.store.usage import UsageMixin
from cardloop.store.values import StoreError, StoreUnavailable, TenantScopeError, check_tenant
from cardloop.store.workflow_state import WorkflowStateMixin

__all__ = ["TOKEN_PREFIX", "Store", "scram_sha256_verifier"]


class Store(
    LedgerMixin,  # first: it builds on CardsMixin and UsageMixin
    LimitsMixin,
    CardsMixin,
    CardAliasesMixin,
    ContextMixin,
    ResearchMixin,
    BlobsMixin,
    ResealMixin,
    SummariesMixin,
    UsageMixin,
    DeliveriesMixin,
    TenantPromptsMixin,
    ApiTokensMixin,
    WorkflowStateMixin,
):
    """Everything too large for a Temporal payload, keyed by card key 'tenant/board/card id'.

    One Store is shared by all threads of a worker: every method is one short transaction on a
    pooled connection. Writes are idempotent where Temporal may retry them: appends by
    `dedup_key`, usage by `call_key`, blobs by content, summaries by range, deliveries by id.
    """

    def __init__(self, url: str, *, blob_keys: KeyRing | None = None) -> None:
        """Create the engine without touching the schema; `Store.open` also migrates.

        `blob_keys`: the codec's key ring; given, blob contents are encrypted at rest with it
        (store/sealing.py). Blobs stored before, in plain text, are read either way."""
        self._db = open_database(url)
        self._sealer = BlobSealer(blob_keys) if blob_keys is not None else None
        self._scope = None  # set on the views for_tenant returns
        self._owns_db = True
        self.clock = lambda: datetime.now(UTC)

    @classmethod
    def open(cls, url: str, *, blob_keys: KeyRing | None = None) -> Store:
        store = cls(url, blob_keys=blob_keys)
        try:
            store.migrate()
        except (OperationalError, StoreUnavailable) as exc:
            store.close()
            # Start-up names the database (password masked) instead of a driver traceback.
            driver = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
            reason = getattr(driver, "orig", None) or exc
            # One line: psycopg's reasons go on over several ("\n\tIs the server running ...").
            raise StoreError(f"cannot open the store at {store.url}: {' '.join(str(reason).split())}") from exc
        except ProgrammingError as exc:
            store.close()
            # The application role of a provisioned database may not create tables: a release with
            # a new migration must be migrated once by the owner (Store.provision_postgres_role does).
            raise StoreError(
                f"cannot migrate the store at {store.url}: {exc.orig}. Migrate as the schema's owner "
                "first (Store.provision_postgres_role(owner_url, role) migrates, then grants the role)"
            ) from exc
        except DatabaseError as exc:
            store.close()
            # A file that SQLite cannot read as a database (a config file or a log at the store's
            # path, a truncated copy): the driver's error, with the file it was about.
            raise StoreError(f"cannot open the store at {store.url}: {exc.orig}") from exc
        except BaseException:
            store.close()
            raise
        return store

    def migrate(self) -> list[int]:
        """Apply missing migrations (idempotent, safe concurrently); return the versions applied."""
        return migrations.migrate(self._db)

    def schema_version(self) -> int:
        with self._db.read() as conn:
            return migrations.schema_version(conn)

    def close(self) -> None:
        if self._owns_db:  # a tenant view shares its parent's engine: the parent closes it
            self._db.dispose()

    # -- tenant scope ---------------------------------------------------------------------------

    @property
    def blob_key_ids(self) -> tuple[str, ...]:
        """The ids of the keys blobs are encrypted with at rest, the sealing one first; empty when
        blobs are written in plain text (`cardloop doctor` says which)."""
        return self._sealer.ring.ids if self._sealer is not None else ()

    def for_tenant(self, tenant: str) -> Store:
        """A view of this store for one tenant: every transaction is scoped to `tenant` (row-level
        security on PostgreSQL) and a call naming another tenant raises TenantScopeError.

        Cheap (no connection is opened); it shares this store's engine, so closing it is a no-op.
        """
        check_tenant(tenant)
        if self._scope is not None and self._scope != tenant:
            raise TenantScopeError(f"this store is scoped to tenant {self._scope!r}, not {tenant!r}")
        view = copy.copy(self)
        view._scope = tenant
        view._owns_db = False
        return view

    @property
    def tenant(self) -> str | None:
        """The tenant this view is scoped to; None for the plain store."""
        return self._scope

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The URL with any password masked; the real one stays inside the engine."""
        return self._db.masked_url

    @property
    def engine(self) -> Engine:
        return self._db.engine

    @property
    def dialect(self) -> str:
        return self._db.dialect

    def __repr__(self) -> str:
        scope = f", tenant={self._scope!r}" if self._scope is not None else ""
        return f"Store({self.url!r}{scope})"

    # -- PostgreSQL roles -------------------------------------------------------------------------

    @classmethod
    def provision_postgres_role(cls, owner_url: str, role: str, password: str | None = None) -> None:
        """Prepare `role` as the application's database role; run with the schema owner's URL.

        Migrates the schema (as the owner), creates `role` when it does not exist (LOGIN,
        NOSUPERUSER, NOBYPASSRLS; this needs CREATEROLE, else a DBA creates it first) and grants
        it what the store needs in the URL's schema and no more (schema.provision_role_sql).
        The password is sent as a SCRAM-SHA-256 verifier, never in clear. Idempotent: run it again
        after every upgrade, so the role is granted the tables new migrations add.
        """
        with cls.open(owner_url) as store:
            if store.dialect != "postgresql":
                raise StoreError("roles and row-level security exist on PostgreSQL only")
            with store._db.write() as conn:
                provision(conn, role, password)
