"""A card's fields and its chat history: the conversation every stage prompt is built from.

History is append-only with one seq per message; a retried activity appends once (dedup_key),
and concurrent appends to one card queue on the card's counter row (base.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, func, select, update

from cardloop.prompts.card import Card, Message
from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.context import context_dict, context_rows
from cardloop.store.values import MAX_KEY, StoreError


class CardsMixin(StoreBase):
    # -- cards ----------------------------------------------------------------------------------

    def upsert_card(self, card_key: str, card: Card) -> None:
        """Store the card's fields; its history and context are NOT stored here.

        History goes through `append_message`, context through `put_context_items`: they have
        their own idempotency rules, and a re-synced card must not rewrite them.
        """
        tenant = self._card_tenant(card_key)
        if card.tenant != tenant:
            raise StoreError(f"card key {card_key!r} names tenant {tenant!r} but the card belongs to {card.tenant!r}")
        row = {"card_key": card_key, "tenant": tenant, "board": card.board, "card_id": card.id, "repo": card.repo,
               "stage": card.stage.value if card.stage is not None else None,
               "fields": card.model_dump_json(exclude={"history", "context"})}
        stmt = self._upsert(s.cards, ("tenant", "card_key"), ("board", "card_id", "repo", "stage", "fields"),
                            {"updated_at": func.current_timestamp()})
        with self._db.write(tenant) as conn:
            conn.execute(stmt, row)

    def set_gone(self, card_key: str, note: str | None) -> bool:
        """Record that the card was archived or deleted on its board (`note` says so in words:
        "archived on github by sam"), or, with None, that it is back (its next move). True when
        the stored card changed; a card the store does not hold changes nothing."""
        tenant = self._card_tenant(card_key)
        c = s.cards.c
        where = [c.card_key == card_key, c.tenant == tenant]
        if note is None:
            where.append(c.gone.is_not(None))  # the common move: nothing to clear, nothing written
        stmt = update(s.cards).where(*where).values(
            gone=note[:500] if note is not None else None,
            gone_at=datetime.now(UTC) if note is not None else None)
        with self._db.write(tenant) as conn:
            return conn.execute(stmt).rowcount > 0

    def card_gone(self, card_key: str) -> tuple[str, datetime] | None:
        """(what the board said, when) for a card archived or deleted there and not moved since."""
        tenant = self._card_tenant(card_key)
        c = s.cards.c
        with self._db.read(tenant) as conn:
            row = conn.execute(select(c.gone, c.gone_at).where(c.card_key == card_key, c.tenant == tenant)).first()
        return None if row is None or row.gone is None else (row.gone, row.gone_at)

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
            context = [context_dict(row, self._sealer) for row in context_rows(conn, card_key, tenant)]
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
        check_text("dedup_key", dedup_key, MAX_KEY)
        check_text("stage", stage, 64)
        if dedup_key is not None:
            # The common retry case needs no write lock.
            with self._db.read(tenant) as conn:
                seq = _seq_for(conn, card_key, tenant, dedup_key)
            if seq is not None:
                return seq
        with self._db.write(tenant) as conn:
            seq, _ = self._append_locked(conn, card_key, tenant, message, dedup_key, stage)
        return seq

    def _append_locked(self, conn: Connection, card_key: str, tenant: str, message: Message,
                       dedup_key: str | None, stage: str | None) -> tuple[int, bool]:
        """Append inside the caller's write transaction: (seq, True), or (the seq stored under
        `dedup_key` before, False)."""
        seq, _ = self._lock_counter(conn, card_key, tenant)
        if dedup_key is not None:
            # Re-checked under the lock: a concurrent append with this key has committed by now.
            existing = _seq_for(conn, card_key, tenant, dedup_key)
            if existing is not None:
                return existing, False
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
        return seq, True

    def message_by_key(self, card_key: str, dedup_key: str) -> tuple[int, Message] | None:
        """The message appended under `dedup_key` and its seq, or None."""
        tenant = self._card_tenant(card_key)
        with self._db.read(tenant) as conn:
            return message_by_key_in(conn, card_key, tenant, dedup_key)

    def first_seq_under(self, card_key: str, key_prefix: str) -> int | None:
        """The seq of the first message appended under a dedup key starting with `key_prefix`
        (a stage run's messages share its workflow id as prefix), or None."""
        tenant = self._card_tenant(card_key)
        m = s.messages.c
        with self._db.read(tenant) as conn:
            found = conn.execute(
                select(func.min(m.seq)).where(m.card_key == card_key, m.tenant == tenant,
                                              m.dedup_key.startswith(key_prefix, autoescape=True))
            ).scalar()
        return None if found is None else int(found)

    def keyed_messages(self, card_key: str, start: int = 0) -> list[tuple[str | None, Message]]:
        """Messages with seq >= start, in seq order, each with its dedup key (which names the
        stage run that wrote it: '<card workflow>/<run>-<stage>/...')."""
        tenant = self._card_tenant(card_key)
        if start < 0:
            raise StoreError(f"keyed_messages({start}): seqs are 0-based, a window cannot be negative")
        m = s.messages.c
        query = (select(m.dedup_key, m.body).where(m.card_key == card_key, m.tenant == tenant, m.seq >= start)
                 .order_by(m.seq))
        with self._db.read(tenant) as conn:
            rows = list(conn.execute(query))
        return [(row.dedup_key, Message.model_validate_json(row.body)) for row in rows]

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

    def last_reply(self, card_key: str, stage: str) -> Message | None:
        """The newest assistant message a stage stored with text (the plan, a review), or None."""
        tenant = self._card_tenant(card_key)
        m = s.messages.c
        query = (select(m.body).where(m.card_key == card_key, m.tenant == tenant, m.stage == stage,
                                      m.role == "assistant").order_by(m.seq.desc()).limit(20))
        with self._db.read(tenant) as conn:
            for body in conn.execute(query).scalars():
                message = Message.model_validate_json(body)
                if message.content.strip():
                    return message
        return None

    def message_count(self, card_key: str) -> int:
        tenant = self._card_tenant(card_key)
        c = s.card_counters.c
        with self._db.read(tenant) as conn:
            count = conn.execute(
                select(c.next_message_seq).where(c.card_key == card_key, c.tenant == tenant)
            ).scalar_one_or_none()
        return count or 0


    def card_rows(self, tenant: str | None = None, board: str | None = None) -> list[dict[str, Any]]:
        """Every stored card (of `tenant`, of `board`), newest change first: key, tenant, board,
        title, updated_at and the state its last closed run saved (CardState JSON or None).
        On PostgreSQL row-level security shows one tenant's cards: give `tenant` there."""
        if tenant is not None:
            tenant = self._tenant(tenant)
        elif self._scope is not None:
            tenant = self._scope
        c = s.cards.c
        query = select(c.card_key, c.tenant, c.board, c.fields, c.updated_at, c.workflow_state, c.gone)
        if tenant is not None:
            query = query.where(c.tenant == tenant)
        if board is not None:
            query = query.where(c.board == board)
        with self._db.read(tenant) as conn:
            rows = conn.execute(query.order_by(c.updated_at.desc(), c.card_key)).all()
        return [{"card": r.card_key, "tenant": r.tenant, "board": r.board,
                 "title": json.loads(r.fields).get("title", ""), "updated_at": r.updated_at,
                 "workflow_state": r.workflow_state, "gone": r.gone} for r in rows]


def _card_fields_query(card_key: str, tenant: str) -> Any:
    return select(s.cards.c.fields).where(s.cards.c.card_key == card_key, s.cards.c.tenant == tenant)


def _seq_for(conn: Connection, card_key: str, tenant: str, dedup_key: str) -> int | None:
    m = s.messages.c
    seq = conn.execute(
        select(m.seq).where(m.card_key == card_key, m.tenant == tenant, m.dedup_key == dedup_key)
    ).scalar_one_or_none()
    return None if seq is None else int(seq)


def message_by_key_in(conn: Connection, card_key: str, tenant: str, dedup_key: str) -> tuple[int, Message] | None:
    m = s.messages.c
    row = conn.execute(
        select(m.seq, m.body).where(m.card_key == card_key, m.tenant == tenant, m.dedup_key == dedup_key)
    ).one_or_none()
    return None if row is None else (int(row.seq), Message.model_validate_json(row.body))
