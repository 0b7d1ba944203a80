"""The Store: cards, chat history, context, blobs, summaries, LLM usage, deliveries, tenant
prompts and API tokens.

Tenant scoping. Every transaction names the tenant it acts for; on PostgreSQL that is what
row-level security compares each row with (schema.py), on SQLite the queries filter by it.

- The plain Store (workers, CardService, the CLI) takes the tenant from each call: the tenant
  segment of the card key, `put_blob(tenant, ...)`, `UsageRecord.tenant`, the tenant argument of
  the prompt and token methods. `get_blob(ref)` without a tenant reads the one blob `ref` names.
- `store.for_tenant(t)` is a view for code serving one tenant (the tenant API): the same methods
  on the same engine, every transaction scoped to `t`, and any call naming another tenant
  refused with TenantScopeError before the database is asked.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from types import TracebackType
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, Row, Table, bindparam, delete, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.sql.dml import Insert

from cardloop.prompts.card import Card, ContextItem, Message, TenantPrompt
from cardloop.prompts.validate import ValidationResult, ValidationStatus
from cardloop.store import schema as s
from cardloop.store.engine import Database, open_database
from cardloop.store.values import (
    MAX_KEY,
    ApiToken,
    IssuedApiToken,
    NotFoundError,
    StoreError,
    Summary,
    TenantPromptVersion,
    TenantScopeError,
    UsageRecord,
    UsageSum,
    UsageTotals,
    blob_ref,
    check_blob_ref,
    check_tenant,
    decode_text,
    encode_text,
    tenant_of,
)
from cardloop.store.workflow_state import WorkflowStateMixin

_NANO = Decimal("1e-9")
TOKEN_PREFIX = "cl_"  # lets people and secret scanners recognize a cardloop token
# last_used_at is written at most this often per token: authentication stays a read.
TOKEN_USE_RESOLUTION = timedelta(minutes=1)


class Store(WorkflowStateMixin):
    """Everything too large for a Temporal payload, keyed by card key 'tenant/board/card id'.

    One Store is shared by all threads of a worker: every method is one short transaction on a
    pooled connection. Writes are idempotent where Temporal may retry them: appends by
    `dedup_key`, usage by `call_key`, blobs by content, summaries by range, deliveries by id.
    """

    def __init__(self, url: str) -> None:
        """Create the engine without touching the schema; `Store.open` also migrates."""
        self._db: Database = open_database(url)
        self._scope: str | None = None  # set on the views for_tenant returns
        self._owns_db = True
        # The time written to tenant prompt versions and tokens; tests move it.
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    @classmethod
    def open(cls, url: str) -> Store:
        store = cls(url)
        try:
            store.migrate()
        except OperationalError as exc:
            store.close()
            # Start-up names the database (password masked) instead of a driver traceback.
            raise StoreError(f"cannot open the store at {store.url}: {exc.orig}") from exc
        except ProgrammingError as exc:
            store.close()
            # The application role of a provisioned database may not create tables: a release with
            # a new migration must be migrated once by the owner (Store.provision_postgres_role does).
            raise StoreError(
                f"cannot migrate the store at {store.url}: {exc.orig}. Migrate as the schema's owner "
                "first (Store.provision_postgres_role(owner_url, role) migrates, then grants the role)"
            ) from exc
        except BaseException:
            store.close()
            raise
        return store

    def migrate(self) -> list[int]:
        """Apply missing migrations (idempotent, safe concurrently); return the versions applied."""
        return s.migrate(self._db)

    def schema_version(self) -> int:
        with self._db.read() as conn:
            return s.schema_version(conn)

    def close(self) -> None:
        if self._owns_db:  # a tenant view shares its parent's engine: the parent closes it
            self._db.dispose()

    # -- tenant scope ---------------------------------------------------------------------------

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

    def _tenant(self, tenant: str) -> str:
        """The tenant a call acts for, which a scoped view only allows to be its own."""
        if self._scope is not None and tenant != self._scope:
            raise TenantScopeError(
                f"this store is scoped to tenant {self._scope!r}; refusing to touch tenant {tenant!r}"
            )
        return tenant

    def _card_tenant(self, card_key: str) -> str:
        return self._tenant(tenant_of(card_key))

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

    # -- cards ----------------------------------------------------------------------------------

    def upsert_card(self, card_key: str, card: Card) -> None:
        """Store the card's fields; its history and context are NOT stored here.

        History goes through `append_message`, context through `put_context_items`: they have
        their own idempotency rules, and a re-synced card must not rewrite them.
        """
        tenant = self._card_tenant(card_key)
        if card.tenant != tenant:
            raise StoreError(f"card key {card_key!r} names tenant {tenant!r} but the card belongs to {card.tenant!r}")
        stmt = self._insert(s.cards).values(
            card_key=card_key,
            tenant=tenant,
            board=card.board,
            card_id=card.id,
            repo=card.repo,
            stage=card.stage.value if card.stage is not None else None,
            fields=card.model_dump_json(exclude={"history", "context"}),
        )
        changed = ("board", "card_id", "repo", "stage", "fields")
        stmt = stmt.on_conflict_do_update(
            index_elements=[s.cards.c.card_key],
            set_={name: stmt.excluded[name] for name in changed} | {"updated_at": func.current_timestamp()},
        )
        with self._db.write(tenant) as conn:
            conn.execute(stmt)

    def card_fields(self, card_key: str) -> Card | None:
        """The card without history and context (one row read), or None when not stored."""
        tenant = self._card_tenant(card_key)
        with self._db.read(tenant) as conn:
            fields = conn.execute(_card_fields_query(card_key, tenant)).scalar_one_or_none()
        return None if fields is None else Card.model_validate_json(fields)

    def get_card(self, card_key: str) -> Card | None:
        """The full card: fields, history in seq order and the current context items.

        StoreError when the stored history breaks a Card rule (e.g. a tool result whose call
        is not in the history): the store accepts such appends, a Card cannot hold them.
        """
        tenant = self._card_tenant(card_key)
        m = s.messages.c
        with self._db.read(tenant) as conn:
            fields = conn.execute(_card_fields_query(card_key, tenant)).scalar_one_or_none()
            if fields is None:
                return None
            bodies = conn.execute(
                select(m.body).where(m.card_key == card_key, m.tenant == tenant).order_by(m.seq)
            ).scalars()
            history = [json.loads(body) for body in bodies]
            context = [_context_dict(row) for row in self._context_rows(conn, card_key, tenant)]
        data = json.loads(fields) | {"history": history, "context": context}
        try:
            return Card.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'card'}: {e['msg']}" for e in exc.errors())
            raise StoreError(
                f"card {card_key!r}: the stored history and context do not form a valid card: {problems}"
            ) from None

    # -- chat history ---------------------------------------------------------------------------

    def append_message(
        self, card_key: str, message: Message, *, dedup_key: str | None = None, stage: str | None = None
    ) -> int:
        """Append to the card's history; return the message's 0-based seq.

        With a `dedup_key`, appending again (a retried activity) returns the first seq and adds
        nothing. Without one, every call appends. Concurrent appends to one card get distinct,
        consecutive seqs: they queue on the card's counter row.
        """
        tenant = self._card_tenant(card_key)
        _check_text("dedup_key", dedup_key, MAX_KEY)
        _check_text("stage", stage, 64)
        if dedup_key is not None:
            # The common retry case needs no write lock.
            with self._db.read(tenant) as conn:
                seq = _seq_for(conn, card_key, tenant, dedup_key)
            if seq is not None:
                return seq
        with self._db.write(tenant) as conn:
            seq, _ = self._lock_counter(conn, card_key, tenant)
            if dedup_key is not None:
                # Re-checked under the lock: a concurrent append with this key has committed by now.
                existing = _seq_for(conn, card_key, tenant, dedup_key)
                if existing is not None:
                    return existing
            conn.execute(
                s.messages.insert().values(
                    card_key=card_key,
                    seq=seq,
                    tenant=tenant,
                    dedup_key=dedup_key,
                    role=message.role,
                    stage=stage,
                    message_id=message.id,
                    created_at=message.created_at,
                    body=message.model_dump_json(),
                )
            )
            conn.execute(
                update(s.card_counters)
                .where(s.card_counters.c.card_key == card_key, s.card_counters.c.tenant == tenant)
                .values(next_message_seq=seq + 1)
            )
        return seq

    def messages(self, card_key: str, start: int = 0, end: int | None = None) -> list[Message]:
        """Messages with start <= seq < end (end None: to the last), in seq order."""
        tenant = self._card_tenant(card_key)
        if start < 0 or (end is not None and end < 0):
            raise StoreError(f"messages({start}, {end}): seqs are 0-based, a window cannot be negative")
        m = s.messages.c
        query = select(m.body).where(m.card_key == card_key, m.tenant == tenant, m.seq >= start)
        if end is not None:
            query = query.where(m.seq < end)
        with self._db.read(tenant) as conn:
            bodies = list(conn.execute(query.order_by(s.messages.c.seq)).scalars())
        return [Message.model_validate_json(body) for body in bodies]

    def message_count(self, card_key: str) -> int:
        tenant = self._card_tenant(card_key)
        c = s.card_counters.c
        with self._db.read(tenant) as conn:
            count = conn.execute(
                select(c.next_message_seq).where(c.card_key == card_key, c.tenant == tenant)
            ).scalar_one_or_none()
        return count or 0

    # -- context ----------------------------------------------------------------------------------

    def put_context_items(self, card_key: str, items: Sequence[ContextItem], *,
                          replace_kinds: Sequence[str] = ()) -> None:
        """Make `items` the card's context for their sources.

        Every earlier item with one of these sources is dropped (a new build log replaces the
        old one), and so is every earlier item of a kind in `replace_kinds` (a context source
        that looked again replaces all it found before: yesterday's failed run must not stay
        once CI is green); other items stay. The new items come after the kept ones, in the
        given order. Contents are stored once per tenant as blobs, by digest. Idempotent.
        """
        tenant = self._card_tenant(card_key)
        if not items and not replace_kinds:
            return
        sources = {item.source for item in items}
        contents = {blob_ref(item.content): (item.content, f"context/{item.kind.value}") for item in items}
        ci = s.context_items.c
        with self._db.write(tenant) as conn:
            _, base = self._lock_counter(conn, card_key, tenant)
            conn.execute(
                delete(s.context_items).where(
                    ci.card_key == card_key, ci.tenant == tenant,
                    or_(ci.source.in_(sorted(sources)), ci.kind.in_(sorted(replace_kinds))),
                )
            )
            if not items:
                return
            self._put_blobs(conn, tenant, contents)
            conn.execute(
                s.context_items.insert(),
                [
                    {
                        "card_key": card_key,
                        "ord": base + i,
                        "tenant": tenant,
                        "source": item.source,
                        "kind": item.kind.value,
                        "content_ref": blob_ref(item.content),
                        "meta": item.model_dump_json(exclude={"content"}),
                    }
                    for i, item in enumerate(items)
                ],
            )
            conn.execute(
                update(s.card_counters)
                .where(s.card_counters.c.card_key == card_key, s.card_counters.c.tenant == tenant)
                .values(next_context_ord=base + len(items))
            )

    def context_items(self, card_key: str) -> list[ContextItem]:
        tenant = self._card_tenant(card_key)
        with self._db.read(tenant) as conn:
            rows = self._context_rows(conn, card_key, tenant)
        return [ContextItem.model_validate(_context_dict(row)) for row in rows]

    # -- blobs ----------------------------------------------------------------------------------

    def put_blob(self, tenant: str, text: str, kind: str) -> str:
        """Store text by content; return its ref 'sha256:<hex>'. Idempotent: same text, same ref."""
        self._tenant(check_tenant(tenant))
        _check_text("kind", kind, 64, required=True)
        ref = blob_ref(text)
        with self._db.write(tenant) as conn:
            self._put_blobs(conn, tenant, {ref: (text, kind)})
        return ref

    def get_blob(self, ref: str, *, tenant: str | None = None) -> str:
        """The text stored under `ref`; NotFoundError (a StoreError and KeyError) when missing.

        With a tenant (or on a tenant view) only that tenant's copy is read. Without one, the ref
        itself is the permission: a worker holds it from its own workflow's payload, and the
        database lets a transaction read the blob whose ref it names, never list blobs.
        """
        check_blob_ref(ref)
        tenant = self._tenant(check_tenant(tenant)) if tenant is not None else self._scope
        query = select(s.blobs.c.data).where(s.blobs.c.ref == ref)
        if tenant is not None:
            query = query.where(s.blobs.c.tenant == tenant)
        scope = self._db.read(tenant) if tenant is not None else self._db.read(blob_ref=ref)
        with scope as conn:
            data = conn.execute(query.limit(1)).scalar_one_or_none()
        if data is None:
            raise NotFoundError(f"blob {ref} is not in the store")
        return decode_text(bytes(data))

    # -- summaries ------------------------------------------------------------------------------

    def put_summary(
        self, card_key: str, first: int, last: int, model: str, text: str, tokens: int, method: str
    ) -> bool:
        """Cache a summary of messages first..last (inclusive). The first one stored for a
        (card, range, model) wins, so every reader folds the same text; False when it existed."""
        tenant = self._card_tenant(card_key)
        _check_range(first, last)
        _check_text("model", model, 200, required=True)
        _check_text("method", method, 32, required=True)
        if tokens < 0:
            raise StoreError(f"summary tokens {tokens}: cannot be negative")
        values = {
            "card_key": card_key,
            "model": model,
            "first_seq": first,
            "last_seq": last,
            "tenant": tenant,
            "method": method,
            "tokens": tokens,
            "text": text,
        }
        with self._db.write(tenant) as conn:
            return self._insert_new(conn, s.summaries, values)

    def find_summary(self, card_key: str, first: int, last: int, model: str) -> Summary | None:
        """The summary of exactly first..last by `model`."""
        return self._summary(card_key, first, last, model, exact=True)

    def best_summary(self, card_key: str, first: int, last: int, model: str) -> Summary | None:
        """The summary starting at `first` that reaches furthest without passing `last`:
        summarizing first..last then only needs that summary plus the messages after it."""
        return self._summary(card_key, first, last, model, exact=False)

    def _summary(self, card_key: str, first: int, last: int, model: str, *, exact: bool) -> Summary | None:
        tenant = self._card_tenant(card_key)
        _check_range(first, last)
        t = s.summaries.c
        query = select(t.first_seq, t.last_seq, t.text, t.tokens, t.method).where(
            t.card_key == card_key, t.tenant == tenant, t.model == model, t.first_seq == first
        )
        query = query.where(t.last_seq == last) if exact else query.where(t.last_seq <= last)
        with self._db.read(tenant) as conn:
            row = conn.execute(query.order_by(t.last_seq.desc()).limit(1)).one_or_none()
        if row is None:
            return None
        return Summary(
            card_key=card_key,
            first=row.first_seq,
            last=row.last_seq,
            model=model,
            text=row.text,
            tokens=row.tokens,
            method=row.method,
        )

    # -- LLM usage ------------------------------------------------------------------------------

    def record_usage(self, record: UsageRecord) -> bool:
        """Record one call's usage once per `call_key`; False when it was recorded before."""
        tenant = self._tenant(record.tenant)  # the record checks that it matches its card key
        values = record.model_dump(exclude={"cost_usd"})
        values["cost_nanousd"] = int((record.cost_usd / _NANO).to_integral_value(ROUND_HALF_EVEN))
        with self._db.write(tenant) as conn:
            return self._insert_new(conn, s.llm_usage, values)

    def usage_totals(self, card_key: str) -> UsageTotals:
        tenant = self._card_tenant(card_key)
        u = s.llm_usage.c
        sums = [
            func.count().label("calls"),
            func.sum(u.input_tokens).label("input_tokens"),
            func.sum(u.output_tokens).label("output_tokens"),
            func.sum(u.cache_read_tokens).label("cache_read_tokens"),
            func.sum(u.cache_write_tokens).label("cache_write_tokens"),
            func.sum(u.cost_nanousd).label("cost_nanousd"),
        ]
        query = (
            select(u.stage, *sums)
            .where(u.card_key == card_key, u.tenant == tenant)
            .group_by(u.stage)
            .order_by(u.stage)
        )
        with self._db.read(tenant) as conn:
            by_stage = {row.stage: _usage_sum(row._mapping) for row in conn.execute(query)}
        total = UsageSum(
            calls=sum(x.calls for x in by_stage.values()),
            input_tokens=sum(x.input_tokens for x in by_stage.values()),
            output_tokens=sum(x.output_tokens for x in by_stage.values()),
            cache_read_tokens=sum(x.cache_read_tokens for x in by_stage.values()),
            cache_write_tokens=sum(x.cache_write_tokens for x in by_stage.values()),
            cost_usd=sum((x.cost_usd for x in by_stage.values()), Decimal(0)),
        )
        return UsageTotals(card_key=card_key, total=total, by_stage=by_stage)

    # -- deliveries -----------------------------------------------------------------------------

    def record_delivery(self, tenant: str, source: str, delivery_id: str) -> bool:
        """Remember a webhook/transition delivery id; False when it was seen before."""
        self._tenant(check_tenant(tenant))
        _check_text("source", source, 100, required=True)
        _check_text("delivery_id", delivery_id, 300, required=True)
        with self._db.write(tenant) as conn:
            return self._insert_new(
                conn, s.deliveries, {"tenant": tenant, "source": source, "delivery_id": delivery_id}
            )

    # -- tenant prompts -------------------------------------------------------------------------
    #
    # Versions are immutable rows of tenant_prompts; tenant_prompt_heads hands out the numbers and
    # points at the active one. PUT, rollback and DELETE each append a version (a deletion is a
    # version marked deleted), so the history says who changed what, when, even after a deletion.

    def put_tenant_prompt(
        self, tenant: str, prompt: TenantPrompt, validation: ValidationResult, created_by: str
    ) -> TenantPromptVersion:
        """Store `prompt` as the tenant's new current version and return it.

        `validation` is `validate_tenant_prompt(prompt.custom_system_prompt)`: REJECTED is refused
        (StoreError, nothing stored; the database refuses it too); what is stored and used is its
        sanitized prompt. `created_by` says who did it (an API token id, "cli", ...).
        """
        self._tenant(check_tenant(tenant))
        if validation.status == ValidationStatus.REJECTED:
            raise StoreError(f"tenant {tenant!r}: a REJECTED prompt is never stored")
        _check_text("created_by", created_by, 200, required=True)
        values = {
            "deleted": False,
            "custom_system_prompt": validation.sanitized_prompt,
            "override_mode": prompt.override_mode,
            "language_preference": prompt.language_preference,
            "tone_profile": json.dumps(dict(prompt.tone_profile), ensure_ascii=False, sort_keys=True),
            "validation_status": validation.status.value,
            "issues": json.dumps(validation.to_dict()["issues"], ensure_ascii=False),
            "submitted_sha256": hashlib.sha256(encode_text(prompt.custom_system_prompt)).hexdigest(),
            "restored_from": None,
            "created_by": created_by,
        }
        with self._db.write(tenant) as conn:
            return self._append_prompt_version(conn, tenant, values, active=True)

    def current_tenant_prompt(self, tenant: str) -> TenantPromptVersion | None:
        """The active version (None when the tenant never had one or deleted it); `.prompt` is
        what the prompt core takes as `AssemblyRequest.tenant_prompt`."""
        self._tenant(check_tenant(tenant))
        h, v = s.tenant_prompt_heads.c, s.tenant_prompts.c
        query = (
            select(s.tenant_prompts)
            .join_from(s.tenant_prompts, s.tenant_prompt_heads,
                       (h.tenant == v.tenant) & (h.current_version == v.version))
            .where(v.tenant == tenant)
        )
        with self._db.read(tenant) as conn:
            row = conn.execute(query).one_or_none()
        return None if row is None else _prompt_version(row._mapping)

    def tenant_prompt_versions(self, tenant: str) -> list[TenantPromptVersion]:
        """Every version, deletions included, oldest first."""
        self._tenant(check_tenant(tenant))
        v = s.tenant_prompts.c
        with self._db.read(tenant) as conn:
            rows = conn.execute(select(s.tenant_prompts).where(v.tenant == tenant).order_by(v.version)).all()
        return [_prompt_version(row._mapping) for row in rows]

    def tenant_prompt_version(self, tenant: str, version: int) -> TenantPromptVersion | None:
        self._tenant(check_tenant(tenant))
        with self._db.read(tenant) as conn:
            row = conn.execute(_version_query(tenant, version)).one_or_none()
        return None if row is None else _prompt_version(row._mapping)

    def delete_tenant_prompt(self, tenant: str, created_by: str = "system") -> bool:
        """Leave the tenant without an active prompt (a new version marked deleted records it).
        False, and nothing written, when there is no active prompt."""
        self._tenant(check_tenant(tenant))
        _check_text("created_by", created_by, 200, required=True)
        values = {
            "deleted": True,
            "custom_system_prompt": "",
            "override_mode": "append",
            "language_preference": "auto",
            "tone_profile": "{}",
            "validation_status": None,
            "issues": "[]",
            "submitted_sha256": None,
            "restored_from": None,
            "created_by": created_by,
        }
        with self._db.write(tenant) as conn:
            head = self._prompt_head(conn, tenant)
            if head is None or head.current_version is None:
                return False
            self._append_prompt_version(conn, tenant, values, active=False)
        return True

    def rollback_tenant_prompt(self, tenant: str, version: int, created_by: str = "system") -> TenantPromptVersion:
        """Make a copy of `version` the new current version (history is never rewritten).

        NotFoundError when the version does not exist; StoreError when it is a deletion.
        """
        self._tenant(check_tenant(tenant))
        _check_text("created_by", created_by, 200, required=True)
        with self._db.write(tenant) as conn:
            # The head first: rollbacks and PUTs of one tenant queue on it in one order.
            self._prompt_head(conn, tenant)
            row = conn.execute(_version_query(tenant, version)).one_or_none()
            if row is None:
                raise NotFoundError(f"tenant {tenant!r} has no prompt version {version}")
            source = row._mapping
            if source["deleted"]:
                raise StoreError(f"tenant {tenant!r}: version {version} records a deletion; it holds no prompt")
            copied = ("custom_system_prompt", "override_mode", "language_preference", "tone_profile",
                      "validation_status", "issues", "submitted_sha256")
            values = {name: source[name] for name in copied} | {
                "deleted": False, "restored_from": version, "created_by": created_by,
            }
            return self._append_prompt_version(conn, tenant, values, active=True)

    def _prompt_head(self, conn: Connection, tenant: str) -> Row[Any] | None:
        h = s.tenant_prompt_heads.c
        return conn.execute(
            select(h.latest_version, h.current_version).where(h.tenant == tenant).with_for_update()
        ).one_or_none()

    def _append_prompt_version(
        self, conn: Connection, tenant: str, values: Mapping[str, Any], *, active: bool
    ) -> TenantPromptVersion:
        now = self.clock()
        h = s.tenant_prompt_heads.c
        conn.execute(
            self._insert(s.tenant_prompt_heads)
            .values(tenant=tenant, latest_version=0, current_version=None, updated_at=now)
            .on_conflict_do_nothing(index_elements=[h.tenant])
        )
        # Locked: two concurrent PUTs get consecutive versions instead of one failing on the key.
        head = self._prompt_head(conn, tenant)
        assert head is not None  # inserted above, or already there
        version = int(head.latest_version) + 1
        row = {**values, "tenant": tenant, "version": version, "created_at": now}
        conn.execute(s.tenant_prompts.insert().values(**row))
        conn.execute(
            update(s.tenant_prompt_heads)
            .where(h.tenant == tenant)
            .values(latest_version=version, current_version=version if active else None, updated_at=now)
        )
        return _prompt_version(row)

    # -- API tokens -----------------------------------------------------------------------------

    def create_api_token(self, tenant: str, name: str) -> IssuedApiToken:
        """A new bearer token for `tenant`. Its plaintext is in the result and nowhere else: the
        database keeps its SHA-256. It starts with "cl_" so people and secret scanners spot it."""
        self._tenant(check_tenant(tenant))
        _check_text("name", name, 200, required=True)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        info = ApiToken(id="tok_" + secrets.token_hex(8), tenant=tenant, name=name, created_at=self.clock())
        with self._db.write(tenant) as conn:
            conn.execute(
                s.api_tokens.insert().values(
                    id=info.id, tenant=tenant, name=name, token_sha256=_token_digest(token), created_at=info.created_at
                )
            )
        return IssuedApiToken(info=info, token=token)

    def revoke_api_token(self, tenant: str, token_id: str) -> bool:
        """Revoke one of the tenant's tokens at once; False when the tenant has no such token.
        Revoking again is a no-op that answers True (the first revocation time is kept)."""
        self._tenant(check_tenant(tenant))
        t = s.api_tokens.c
        with self._db.write(tenant) as conn:
            conn.execute(
                update(s.api_tokens)
                .where(t.id == token_id, t.tenant == tenant, t.revoked_at.is_(None))
                .values(revoked_at=self.clock())
            )
            found = conn.execute(select(t.id).where(t.id == token_id, t.tenant == tenant)).first()
        return found is not None

    def api_tokens(self, tenant: str) -> list[ApiToken]:
        """The tenant's tokens, revoked ones included, oldest first (never a hash or a token)."""
        self._tenant(check_tenant(tenant))
        t = s.api_tokens.c
        with self._db.read(tenant) as conn:
            rows = conn.execute(
                select(t.id, t.tenant, t.name, t.created_at, t.revoked_at, t.last_used_at)
                .where(t.tenant == tenant)
                .order_by(t.created_at, t.id)
            ).all()
        return [ApiToken.model_validate(dict(row._mapping)) for row in rows]

    def api_token_id(self, tenant: str, token: str) -> str | None:
        """The id of the tenant's token `token` (revoked or not), for audit trails."""
        self._tenant(check_tenant(tenant))
        t = s.api_tokens.c
        with self._db.read(tenant) as conn:
            return conn.execute(
                select(t.id).where(t.token_sha256 == _token_digest(token), t.tenant == tenant)
            ).scalar_one_or_none()

    def tenant_for_token(self, token: str) -> str | None:
        """The tenant of a valid (not revoked) token, else None. Looked up by SHA-256: the
        plaintext is never compared, so timing says nothing about it. `last_used_at` is written
        at most once a minute per token.

        On PostgreSQL the tenant is not known yet, so row-level security would hide the row:
        the lookup is `cardloop_token_tenant(hash, now)`, a SECURITY DEFINER function that
        answers for exactly one hash (schema.py).
        """
        if not isinstance(token, str) or not token or len(token) > 512:
            return None
        digest = _token_digest(token)
        now = self.clock()
        if self._db.dialect == "postgresql":
            call = text("SELECT cardloop_token_tenant(CAST(:digest AS text), CAST(:at AS timestamptz))")
            call = call.bindparams(bindparam("at", type_=s.UTCDateTime()))
            with self._db.write() as conn:
                tenant = conn.execute(call, {"digest": digest, "at": now}).scalar_one_or_none()
        else:
            t = s.api_tokens.c
            with self._db.read() as conn:
                row = conn.execute(
                    select(t.id, t.tenant, t.last_used_at).where(t.token_sha256 == digest, t.revoked_at.is_(None))
                ).one_or_none()
            if row is None:
                return None
            tenant = row.tenant
            stale = now - TOKEN_USE_RESOLUTION
            if row.last_used_at is None or row.last_used_at <= stale:
                with self._db.write(tenant) as conn:
                    conn.execute(
                        update(s.api_tokens)
                        .where(t.id == row.id, (t.last_used_at.is_(None)) | (t.last_used_at <= stale))
                        .values(last_used_at=now)
                    )
        if tenant is None or (self._scope is not None and tenant != self._scope):
            return None
        return str(tenant)

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
                _provision(conn, role, password)

    # -- internals ------------------------------------------------------------------------------

    def _insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        return postgresql.insert(table) if self._db.dialect == "postgresql" else sqlite.insert(table)

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
            .on_conflict_do_nothing(index_elements=[c.card_key])
        )
        # FOR UPDATE queues concurrent writers on PostgreSQL; SQLite is already serialized by
        # BEGIN IMMEDIATE (SQLAlchemy leaves FOR UPDATE out there).
        row = conn.execute(
            select(c.next_message_seq, c.next_context_ord)
            .where(c.card_key == card_key, c.tenant == tenant)
            .with_for_update()
        ).one()
        return int(row.next_message_seq), int(row.next_context_ord)

    def _put_blobs(self, conn: Connection, tenant: str, contents: Mapping[str, tuple[str, str]]) -> None:
        # Sorted by ref: two transactions inserting overlapping sets then wait on each other in
        # the same order and cannot deadlock.
        for ref in sorted(contents):
            text, kind = contents[ref]
            data = encode_text(text)
            row = {"ref": ref, "tenant": tenant, "kind": kind, "size": len(data), "data": data}
            self._insert_new(conn, s.blobs, row)

    def _context_rows(self, conn: Connection, card_key: str, tenant: str) -> list[Row[Any]]:
        c, b = s.context_items.c, s.blobs.c
        query = (
            select(c.meta, b.data)
            .join_from(s.context_items, s.blobs, (b.ref == c.content_ref) & (b.tenant == c.tenant))
            .where(c.card_key == card_key, c.tenant == tenant)
            .order_by(c.ord)
        )
        return list(conn.execute(query))


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _version_query(tenant: str, version: int) -> Any:
    v = s.tenant_prompts.c
    return select(s.tenant_prompts).where(v.tenant == tenant, v.version == version)


def _prompt_version(row: Mapping[str, Any]) -> TenantPromptVersion:
    return TenantPromptVersion(
        tenant=row["tenant"],
        version=row["version"],
        deleted=bool(row["deleted"]),
        custom_system_prompt=row["custom_system_prompt"],
        override_mode=row["override_mode"],
        language_preference=row["language_preference"],
        tone_profile=json.loads(row["tone_profile"]),
        validation_status=row["validation_status"],
        issues=tuple(json.loads(row["issues"])),
        submitted_sha256=row["submitted_sha256"],
        restored_from=row["restored_from"],
        created_by=row["created_by"],
        created_at=row["created_at"],
    )


def _provision(conn: Connection, role: str, password: str | None) -> None:
    quote = conn.dialect.identifier_preparer.quote
    if not isinstance(role, str) or not role or len(role) > 63:
        raise StoreError(f"role {role!r}: expected a PostgreSQL role name of 1 to 63 characters")
    if role == conn.execute(text("SELECT current_user")).scalar_one():
        raise StoreError(f"role {role!r} is the schema owner; the application needs a role of its own")
    found = conn.execute(
        text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :role"), {"role": role}
    ).one_or_none()
    verifier = f" PASSWORD '{scram_sha256_verifier(password)}'" if password is not None else ""
    if found is None:
        try:
            conn.exec_driver_sql(
                f"CREATE ROLE {quote(role)} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE{verifier}"
            )
        except ProgrammingError as exc:
            raise StoreError(
                f"cannot create role {role!r} ({exc.orig}); have a superuser run: CREATE ROLE {quote(role)} "
                "LOGIN PASSWORD '...'; then provision again to grant it"
            ) from None
    else:
        if found.rolsuper or found.rolbypassrls:
            raise StoreError(f"role {role!r} is a superuser or has BYPASSRLS: row-level security would not bind it")
        if verifier:
            try:
                conn.exec_driver_sql(f"ALTER ROLE {quote(role)}{verifier}")
            except ProgrammingError as exc:
                raise StoreError(f"cannot set the password of role {role!r} ({exc.orig}); "
                                 "provision without a password, or as a role with CREATEROLE") from None
    for statement in s.provision_role_sql(conn, role):
        conn.exec_driver_sql(statement)


def scram_sha256_verifier(password: str, *, salt: bytes | None = None, iterations: int = 4096) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677), computed here
    so the plaintext never reaches the server or its statement log."""
    if not password or not password.isascii() or not password.isprintable():
        # PostgreSQL SASLpreps non-ASCII passwords first; printable ASCII needs no preparation.
        raise StoreError("the role password must be printable ASCII (generate one, e.g. secrets.token_urlsafe)")
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("ascii"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = base64.b64encode
    return (
        f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}"
        f"${b64(stored_key).decode()}:{b64(server_key).decode()}"
    )


def _card_fields_query(card_key: str, tenant: str) -> Any:
    return select(s.cards.c.fields).where(s.cards.c.card_key == card_key, s.cards.c.tenant == tenant)


def _seq_for(conn: Connection, card_key: str, tenant: str, dedup_key: str) -> int | None:
    m = s.messages.c
    seq = conn.execute(
        select(m.seq).where(m.card_key == card_key, m.tenant == tenant, m.dedup_key == dedup_key)
    ).scalar_one_or_none()
    return None if seq is None else int(seq)


def _context_dict(row: Row[Any]) -> dict[str, Any]:
    return json.loads(row.meta) | {"content": decode_text(bytes(row.data))}


def _usage_sum(row: Mapping[str, Any]) -> UsageSum:
    # int(): PostgreSQL sums BIGINT as NUMERIC, which arrives as Decimal.
    return UsageSum(
        calls=int(row["calls"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        cache_read_tokens=int(row["cache_read_tokens"]),
        cache_write_tokens=int(row["cache_write_tokens"]),
        cost_usd=Decimal(int(row["cost_nanousd"])).scaleb(-9),
    )


def _check_text(name: str, value: str | None, limit: int, *, required: bool = False) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value or len(value) > limit:
        raise StoreError(f"{name} {value!r}: expected a non-empty string of at most {limit} characters")


def _check_range(first: int, last: int) -> None:
    if not 0 <= first <= last:
        raise StoreError(f"summary range {first}..{last}: expected 0 <= first <= last (inclusive message seqs)")
