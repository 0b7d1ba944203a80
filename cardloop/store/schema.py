"""The tables, as the code uses them after every migration (migrations.py creates them).

The `Table` objects below describe the schema as the code uses it *after* every migration.
Migrations never build DDL from them: a migration is frozen once released, while the tables
move on. `tests/cardloop/test_store.py` checks that the migrated database and these tables agree.

To change the schema: append a `Migration` with the next version in migrations.py (never edit a
released one) and update the tables here. Each migration runs in its own transaction together with the insert of
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
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
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
    text,
)

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
    # Migration 11: the card was archived or deleted on its board ("archived on github by sam"),
    # and when; cleared by its next move. Its stage was cancelled, its work kept.
    Column("gone", String(500)),
    Column("gone_at", UTCDateTime),
    # Keys are unique per tenant (migration 4): another tenant's key never collides with one's own.
    PrimaryKeyConstraint("tenant", "card_key", name="pk_cards"),
    Index("ix_cards_tenant_board", "tenant", "board"),
    Index("ix_cards_tenant_repo", "tenant", "repo"),
)

# The ids a board gives a card besides the one its key was made of (migration 12): its stable id
# (kind "uid": Linear's issue UUID, Jira's numeric issue id, Trello's long card id), which a move to
# another team or project keeps, and the names it had or has on the board since (kind "name", the
# card id part of a key: Linear's OPS-45 after ENG-123 moved team). The card keeps its first key
# (its store rows and its Temporal workflow are under it); these rows lead a board's new name to it.
# Keyed by tenant and board first: a name or uid never leads to another tenant's or board's card.
card_aliases = Table(
    "card_aliases",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("board", String(100), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("value", String(300), nullable=False),
    Column("card_key", String(500), nullable=False),
    # When the board last gave the card this name: the newest name is what the board shows now.
    Column("named_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("tenant", "board", "kind", "value", name="pk_card_aliases"),
    Index("ix_card_aliases_card", "tenant", "card_key"),
)

# Migration 13: the board items that held a card's issue (a GitHub Projects v2 item's node id).
# A project item keeps its node id when its issue is transferred to another repository, which
# gives the issue a new number and node id: a move of the item that arrives before (or without)
# the transfer's own delivery reaches the card the item held. The first card an item is recorded
# for keeps it; keyed by tenant and board first, as card_aliases.
card_board_items = Table(
    "card_board_items",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("board", String(100), nullable=False),
    Column("item", String(300), nullable=False),
    Column("card_key", String(500), nullable=False),
    Column("seen_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("tenant", "board", "item", name="pk_card_board_items"),
    Index("ix_card_board_items_card", "tenant", "card_key"),
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
    Column("status", String(16), nullable=False, server_default=text("'done'")),  # UsageRecord.status
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    # Integer billionths of a dollar: exact sums on both databases without a DECIMAL type on SQLite.
    Column("cost_nanousd", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    # Migration 6: the gateway's API token (its id) that made the call; a refused call's reason.
    Column("token_id", String(40)),
    Column("note", String(500)),
    # Migration 10: what an admitted call holds against the token and cost caps while it is
    # "calling" (store/limits.py); apart from its usage, which billing and the card's totals read.
    Column("reserved_tokens", BigInteger, nullable=False, server_default=text("0")),
    Column("reserved_nanousd", BigInteger, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("tenant", "card_key", "call_key", "attempt", name="pk_llm_usage"),
    Index("ix_llm_usage_card", "card_key", "stage"),
    Index("ix_llm_usage_tenant_time", "tenant", "created_at"),  # the limits' windows (store/limits.py)
    Index("ix_llm_usage_token_time", "tenant", "token_id", "created_at"),
)

# Closed hours of the ledger summed per tenant (scope "") and per API token (scope = its id), so
# the spend limits' day and month windows read a few rows instead of a month of calls
# (store/limits.py, migration 7). The row with scope "~" holds how far the sums go (`hour`).
usage_hours = Table(
    "usage_hours",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("scope", String(40), nullable=False),
    Column("hour", UTCDateTime, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("cost_nanousd", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant", "scope", "hour", name="pk_usage_hours"),
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

research_buffers = Table(
    "research_buffers",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("card_key", String(500), nullable=False),
    Column("buffer_id", Integer, nullable=False),
    Column("name", String(500), nullable=False),
    Column("blob_ref", String(80), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("lines", BigInteger, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("chunk_tokens", Integer, nullable=False),
    Column("overlap_lines", Integer, nullable=False),
    Column("inserted_at", UTCDateTime, nullable=False, server_default=_now()),
    PrimaryKeyConstraint("tenant", "card_key", "buffer_id", name="pk_research_buffers"),
    UniqueConstraint("tenant", "card_key", "name", "blob_ref", "chunk_tokens", "overlap_lines",
                     name="uq_research_buffers_content"),
)

research_chunks = Table(
    "research_chunks",
    metadata,
    Column("tenant", String(100), nullable=False),
    Column("card_key", String(500), nullable=False),
    Column("chunk_id", Integer, nullable=False),
    Column("buffer_id", Integer, nullable=False),
    Column("first_line", BigInteger, nullable=False),
    Column("last_line", BigInteger, nullable=False),
    Column("start_char", BigInteger, nullable=False),
    Column("end_char", BigInteger, nullable=False),
    Column("tokens", Integer, nullable=False),
    PrimaryKeyConstraint("tenant", "card_key", "chunk_id", name="pk_research_chunks"),
    Index("ix_research_chunks_buffer", "tenant", "card_key", "buffer_id"),
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
    # The guard model's reading at PUT time ("allow" and why, and which model); NULL when no guard
    # profile was configured. A "reject" is answered 400 and never stored, like a REJECTED prompt.
    Column("guard_verdict", String(16)),
    Column("guard_reason", String(500)),
    Column("guard_model", String(200)),
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
    "usage_hours",
    "research_buffers",
    "research_chunks",
    "card_aliases",
    "card_board_items",
)
TOKEN_LOOKUP_FUNCTION = "cardloop_token_tenant"
