"""The Store: cards, chat history, context, blobs, summaries, LLM usage and deliveries."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from types import TracebackType
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, Row, Table, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.dml import Insert

from cardloop.store import schema as s
from cardloop.store.engine import Database, open_database
from cardloop.store.values import (
    MAX_KEY,
    NotFoundError,
    StoreError,
    Summary,
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
from prompts.card import Card, ContextItem, Message

_NANO = Decimal("1e-9")


class Store:
    """Everything too large for a Temporal payload, keyed by card key 'tenant/board/card id'.

    One Store is shared by all threads of a worker: every method is one short transaction on a
    pooled connection. Writes are idempotent where Temporal may retry them: appends by
    `dedup_key`, usage by `call_key`, blobs by content, summaries by range, deliveries by id.
    """

    def __init__(self, url: str) -> None:
        """Create the engine without touching the schema; `Store.open` also migrates."""
        self._db: Database = open_database(url)

    @classmethod
    def open(cls, url: str) -> Store:
        store = cls(url)
        try:
            store.migrate()
        except OperationalError as exc:
            store.close()
            # Start-up names the database (password masked) instead of a driver traceback.
            raise StoreError(f"cannot open the store at {store.url}: {exc.orig}") from exc
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
        self._db.dispose()

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
        return f"Store({self.url!r})"

    # -- cards ----------------------------------------------------------------------------------

    def upsert_card(self, card_key: str, card: Card) -> None:
        """Store the card's fields; its history and context are NOT stored here.

        History goes through `append_message`, context through `put_context_items`: they have
        their own idempotency rules, and a re-synced card must not rewrite them.
        """
        tenant = tenant_of(card_key)
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
        with self._db.write() as conn:
            conn.execute(stmt)

    def card_fields(self, card_key: str) -> Card | None:
        """The card without history and context (one row read), or None when not stored."""
        tenant_of(card_key)
        with self._db.read() as conn:
            fields = conn.execute(select(s.cards.c.fields).where(s.cards.c.card_key == card_key)).scalar_one_or_none()
        return None if fields is None else Card.model_validate_json(fields)

    def get_card(self, card_key: str) -> Card | None:
        """The full card: fields, history in seq order and the current context items.

        StoreError when the stored history breaks a Card rule (e.g. a tool result whose call
        is not in the history): the store accepts such appends, a Card cannot hold them.
        """
        tenant_of(card_key)
        with self._db.read() as conn:
            fields = conn.execute(select(s.cards.c.fields).where(s.cards.c.card_key == card_key)).scalar_one_or_none()
            if fields is None:
                return None
            bodies = conn.execute(
                select(s.messages.c.body).where(s.messages.c.card_key == card_key).order_by(s.messages.c.seq)
            ).scalars()
            history = [json.loads(body) for body in bodies]
            context = [_context_dict(row) for row in self._context_rows(conn, card_key)]
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
        tenant = tenant_of(card_key)
        _check_text("dedup_key", dedup_key, MAX_KEY)
        _check_text("stage", stage, 64)
        if dedup_key is not None:
            # The common retry case needs no write lock.
            with self._db.read() as conn:
                seq = _seq_for(conn, card_key, dedup_key)
            if seq is not None:
                return seq
        with self._db.write() as conn:
            seq, _ = self._lock_counter(conn, card_key, tenant)
            if dedup_key is not None:
                # Re-checked under the lock: a concurrent append with this key has committed by now.
                existing = _seq_for(conn, card_key, dedup_key)
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
                update(s.card_counters).where(s.card_counters.c.card_key == card_key).values(next_message_seq=seq + 1)
            )
        return seq

    def messages(self, card_key: str, start: int = 0, end: int | None = None) -> list[Message]:
        """Messages with start <= seq < end (end None: to the last), in seq order."""
        tenant_of(card_key)
        if start < 0 or (end is not None and end < 0):
            raise StoreError(f"messages({start}, {end}): seqs are 0-based, a window cannot be negative")
        query = select(s.messages.c.body).where(s.messages.c.card_key == card_key, s.messages.c.seq >= start)
        if end is not None:
            query = query.where(s.messages.c.seq < end)
        with self._db.read() as conn:
            bodies = list(conn.execute(query.order_by(s.messages.c.seq)).scalars())
        return [Message.model_validate_json(body) for body in bodies]

    def message_count(self, card_key: str) -> int:
        tenant_of(card_key)
        with self._db.read() as conn:
            count = conn.execute(
                select(s.card_counters.c.next_message_seq).where(s.card_counters.c.card_key == card_key)
            ).scalar_one_or_none()
        return count or 0

    # -- context ----------------------------------------------------------------------------------

    def put_context_items(self, card_key: str, items: Sequence[ContextItem]) -> None:
        """Make `items` the card's context for their sources.

        Every earlier item with one of these sources is dropped (a new build log replaces the
        old one); items of other sources stay. The new items come after the kept ones, in the
        given order. Contents are stored once per tenant as blobs, by digest. Idempotent.
        """
        tenant = tenant_of(card_key)
        if not items:
            return
        sources = {item.source for item in items}
        contents = {blob_ref(item.content): (item.content, f"context/{item.kind.value}") for item in items}
        with self._db.write() as conn:
            _, base = self._lock_counter(conn, card_key, tenant)
            conn.execute(
                delete(s.context_items).where(
                    s.context_items.c.card_key == card_key, s.context_items.c.source.in_(sorted(sources))
                )
            )
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
                .where(s.card_counters.c.card_key == card_key)
                .values(next_context_ord=base + len(items))
            )

    def context_items(self, card_key: str) -> list[ContextItem]:
        tenant_of(card_key)
        with self._db.read() as conn:
            rows = self._context_rows(conn, card_key)
        return [ContextItem.model_validate(_context_dict(row)) for row in rows]

    # -- blobs ----------------------------------------------------------------------------------

    def put_blob(self, tenant: str, text: str, kind: str) -> str:
        """Store text by content; return its ref 'sha256:<hex>'. Idempotent: same text, same ref."""
        check_tenant(tenant)
        _check_text("kind", kind, 64, required=True)
        ref = blob_ref(text)
        with self._db.write() as conn:
            self._put_blobs(conn, tenant, {ref: (text, kind)})
        return ref

    def get_blob(self, ref: str) -> str:
        """The text stored under `ref`; NotFoundError (a StoreError and KeyError) when missing."""
        check_blob_ref(ref)
        with self._db.read() as conn:
            data = conn.execute(select(s.blobs.c.data).where(s.blobs.c.ref == ref).limit(1)).scalar_one_or_none()
        if data is None:
            raise NotFoundError(f"blob {ref} is not in the store")
        return decode_text(bytes(data))

    # -- summaries ------------------------------------------------------------------------------

    def put_summary(
        self, card_key: str, first: int, last: int, model: str, text: str, tokens: int, method: str
    ) -> bool:
        """Cache a summary of messages first..last (inclusive). The first one stored for a
        (card, range, model) wins, so every reader folds the same text; False when it existed."""
        tenant = tenant_of(card_key)
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
        with self._db.write() as conn:
            return self._insert_new(conn, s.summaries, values)

    def find_summary(self, card_key: str, first: int, last: int, model: str) -> Summary | None:
        """The summary of exactly first..last by `model`."""
        return self._summary(card_key, first, last, model, exact=True)

    def best_summary(self, card_key: str, first: int, last: int, model: str) -> Summary | None:
        """The summary starting at `first` that reaches furthest without passing `last`:
        summarizing first..last then only needs that summary plus the messages after it."""
        return self._summary(card_key, first, last, model, exact=False)

    def _summary(self, card_key: str, first: int, last: int, model: str, *, exact: bool) -> Summary | None:
        tenant_of(card_key)
        _check_range(first, last)
        t = s.summaries.c
        query = select(t.first_seq, t.last_seq, t.text, t.tokens, t.method).where(
            t.card_key == card_key, t.model == model, t.first_seq == first
        )
        query = query.where(t.last_seq == last) if exact else query.where(t.last_seq <= last)
        with self._db.read() as conn:
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
        values = record.model_dump(exclude={"cost_usd"})
        values["cost_nanousd"] = int((record.cost_usd / _NANO).to_integral_value(ROUND_HALF_EVEN))
        with self._db.write() as conn:
            return self._insert_new(conn, s.llm_usage, values)

    def usage_totals(self, card_key: str) -> UsageTotals:
        tenant_of(card_key)
        u = s.llm_usage.c
        sums = [
            func.count().label("calls"),
            func.sum(u.input_tokens).label("input_tokens"),
            func.sum(u.output_tokens).label("output_tokens"),
            func.sum(u.cache_read_tokens).label("cache_read_tokens"),
            func.sum(u.cache_write_tokens).label("cache_write_tokens"),
            func.sum(u.cost_nanousd).label("cost_nanousd"),
        ]
        query = select(u.stage, *sums).where(u.card_key == card_key).group_by(u.stage).order_by(u.stage)
        with self._db.read() as conn:
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
        check_tenant(tenant)
        _check_text("source", source, 100, required=True)
        _check_text("delivery_id", delivery_id, 300, required=True)
        with self._db.write() as conn:
            return self._insert_new(
                conn, s.deliveries, {"tenant": tenant, "source": source, "delivery_id": delivery_id}
            )

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
            select(c.next_message_seq, c.next_context_ord).where(c.card_key == card_key).with_for_update()
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

    def _context_rows(self, conn: Connection, card_key: str) -> list[Row[Any]]:
        c, b = s.context_items.c, s.blobs.c
        query = (
            select(c.meta, b.data)
            .join_from(s.context_items, s.blobs, (b.ref == c.content_ref) & (b.tenant == c.tenant))
            .where(c.card_key == card_key)
            .order_by(c.ord)
        )
        return list(conn.execute(query))


def _seq_for(conn: Connection, card_key: str, dedup_key: str) -> int | None:
    m = s.messages.c
    seq = conn.execute(select(m.seq).where(m.card_key == card_key, m.dedup_key == dedup_key)).scalar_one_or_none()
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
