"""The claim-check store: what is too large for a Temporal payload lives here, keyed by card.

Activities put cards, chat history, context items, blobs (assembled prompts, logs), history
summaries and LLM usage here and pass references (card keys, seqs, blob refs) through Temporal.
SQLite by default (`sqlite:///path/to/file.sqlite`, `sqlite://` in memory for tests),
PostgreSQL when the URL says so (`postgresql://...`, driven by psycopg 3).

    engine.py          URL rules, engine settings, read/write transactions
    schema.py          the tables, as the code uses them after every migration
    migrations.py      the versioned migrations (table `cardloop_schema`) and the application role
    values.py          StoreError, value objects, card key and blob ref rules
    core.py            Store, the API: opens, migrates and scopes; one mixin per concern below
    base.py            what the mixins share: tenant checks, idempotent inserts, the card counter
    cards.py           card fields and chat history        context.py         context items
    aliases.py         a card's stable board id and later names (a move to another team or project)
    blobs.py           content-addressed blobs             summaries.py       history summaries
    usage.py           the ledger: a row per call attempt  deliveries.py      delivery ids seen
    ledger.py          replies and side effects recorded with their call's usage (exactly once)
    tenant_prompts.py  tenant prompt versions              tokens.py          API tokens
    workflow_state.py  the card workflow's closing state   roles.py           PostgreSQL roles

`Store.open(url)` creates the engine and migrates; one Store is shared by all threads.
`store.for_tenant(t)` is a view scoped to one tenant; on PostgreSQL row-level security enforces
the scope (schema.py says how, `Store.provision_postgres_role` prepares the application role).

PostgreSQL deployment (two roles; superusers and BYPASSRLS roles are never isolated):

1. A DBA creates the owner role and its schema (or database):
       CREATE ROLE cardloop_owner LOGIN PASSWORD '...' NOSUPERUSER NOBYPASSRLS CREATEROLE;
       CREATE SCHEMA cardloop AUTHORIZATION cardloop_owner;    -- or use the owner's database
   (Without CREATEROLE the DBA also runs CREATE ROLE cardloop_app LOGIN PASSWORD '...'.)
2. As the owner, migrate and provision the application role, on every upgrade (idempotent):
       python -c "from cardloop.store import Store; Store.provision_postgres_role(
           'postgresql://cardloop_owner:...@db/cardloop?options=-csearch_path%3Dcardloop', 'cardloop_app', '...')"
   The password travels as a SCRAM verifier; omit it to keep the role's current one.
3. Run the API and the workers with DATABASE_URL naming cardloop_app (same search_path).
   They open the store without migrating; a release with a new migration refuses to start
   until step 2 has run for it. Backups (pg_dump) need a superuser or BYPASSRLS role: FORCEd
   row-level security hides every row from the owner too.
"""

from cardloop.store.core import TOKEN_PREFIX, Store, scram_sha256_verifier
from cardloop.store.migrations import MIGRATIONS, Migration
from cardloop.store.schema import RLS_TABLES
from cardloop.store.tenant_prompts import MAX_PROMPT_VERSION, GuardRecord
from cardloop.store.values import (
    ApiToken,
    IssuedApiToken,
    NotFoundError,
    StoredEffect,
    StoredReply,
    StoreError,
    StoreUnavailable,
    Summary,
    TenantPromptVersion,
    TenantScopeError,
    UsageRecord,
    UsageSum,
    UsageTotals,
    blob_ref,
    card_key_for,
    tenant_of,
)

__all__ = [
    "MAX_PROMPT_VERSION",
    "MIGRATIONS",
    "RLS_TABLES",
    "TOKEN_PREFIX",
    "ApiToken",
    "GuardRecord",
    "IssuedApiToken",
    "Migration",
    "NotFoundError",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "StoredEffect",
    "StoredReply",
    "Summary",
    "TenantPromptVersion",
    "TenantScopeError",
    "UsageRecord",
    "UsageSum",
    "UsageTotals",
    "blob_ref",
    "card_key_for",
    "scram_sha256_verifier",
    "tenant_of",
]
