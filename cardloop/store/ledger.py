"""Side effects recorded together with the ledger row of the call that produced them.

A model reply joins the chat history and its call's usage is settled in ONE transaction, so
no crash can leave a stored reply without its bill or a bill marked kept without its reply.
The first result stored under a key wins; a later one (a zombie attempt whose reply arrived
after another attempt's) is billed as a retry and not kept. Readers get what the store holds:
`stored_reply` and `effect` are what activities/once.py looks up before it acts."""

from __future__ import annotations

from sqlalchemy import Connection, select

from cardloop.prompts.card import Message
from cardloop.store import schema as s
from cardloop.store.base import check_text
from cardloop.store.cards import CardsMixin, message_by_key_in
from cardloop.store.usage import UsageMixin, kept_usage
from cardloop.store.values import MAX_KEY, LatestEffect, StoredEffect, StoredReply, UsageRecord


class LedgerMixin(CardsMixin, UsageMixin):
    def record_reply(self, card_key: str, message: Message, *, dedup_key: str, stage: str | None,
                     usage: UsageRecord) -> int:
        """Append `message` under `dedup_key` (unless one is stored) and settle `usage` as kept
        or, when a reply was stored first, as a retry; return the stored message's seq."""
        tenant = self._card_tenant(card_key)
        check_text("dedup_key", dedup_key, MAX_KEY, required=True)
        check_text("stage", stage, 64)
        with self._db.write(tenant) as conn:
            seq, appended = self._append_locked(conn, card_key, tenant, message, dedup_key, stage)
            self._settle_recorded(conn, card_key, tenant, usage, kept=appended)
        return seq

    def _settle_recorded(self, conn: Connection, card_key: str, tenant: str, usage: UsageRecord, *,
                         kept: bool) -> None:
        """Settle the call's row as kept or as a retry, except that a row already kept stays kept:
        the same record written again (a commit whose answer the connection lost, tried again
        by the activity, activities/heartbeat.py) is not a retry of itself."""
        if not kept:
            found = kept_usage(conn, card_key, tenant, usage.call_key)
            if found is not None and found.attempt == usage.attempt:
                return
        self._upsert_usage(conn, _settled(usage, kept=kept))

    def stored_reply(self, card_key: str, dedup_key: str) -> StoredReply | None:
        """The reply stored under `dedup_key`, with the usage of the call that produced it."""
        # One snapshot for both: the reply and its bill are written in one transaction, and read
        # in one (a transaction fewer for each of the two lookups of every model call).
        tenant = self._card_tenant(card_key)
        with self._db.read(tenant) as conn:
            found = message_by_key_in(conn, card_key, tenant, dedup_key)
            if found is None:
                return None
            seq, message = found
            return StoredReply(seq=seq, message=message, usage=kept_usage(conn, card_key, tenant, dedup_key))

    def record_effect(self, card_key: str, key: str, kind: str, result: str,
                      usage: UsageRecord | None = None) -> bool:
        """Record a side effect's result under `key` once (the first wins), with the usage of
        the call that produced it settled as kept or as a retry; True when this one was kept."""
        tenant = self._card_tenant(card_key)
        check_text("effect key", key, MAX_KEY, required=True)
        check_text("kind", kind, 64, required=True)
        values = {"card_key": card_key, "effect_key": key, "tenant": tenant, "kind": kind, "result": result}
        with self._db.write(tenant) as conn:
            kept = self._insert_new(conn, s.effects, values)
            if usage is not None:
                self._settle_recorded(conn, card_key, tenant, usage, kept=kept)
        return kept

    def effect(self, card_key: str, key: str) -> StoredEffect | None:
        """The result recorded under `key`, with the usage of the call that produced it."""
        tenant = self._card_tenant(card_key)
        e = s.effects.c
        with self._db.read(tenant) as conn:
            result = conn.execute(
                select(e.result).where(e.card_key == card_key, e.tenant == tenant, e.effect_key == key)
            ).scalar_one_or_none()
        if result is None:
            return None
        return StoredEffect(key=key, result=result, usage=self.call_usage(card_key, key))

    def effect_results(self, card_key: str, kind: str) -> list[str]:
        """Every result recorded with `kind` for the card, oldest first (the webhook route reads
        the event times of the board moves it applied, to know a late older one)."""
        tenant = self._card_tenant(card_key)
        e = s.effects.c
        with self._db.read(tenant) as conn:
            return list(conn.execute(
                select(e.result).where(e.card_key == card_key, e.tenant == tenant, e.kind == kind)
                .order_by(e.inserted_at, e.effect_key)
            ).scalars())

    def latest_effect(self, card_key: str, kind: str) -> LatestEffect | None:
        """The newest effect recorded with `kind` for the card: its key, result and time (the
        webhook route asks for cardloop's last board move, to know its echo when it comes back)."""
        tenant = self._card_tenant(card_key)
        e = s.effects.c
        with self._db.read(tenant) as conn:
            row = conn.execute(
                select(e.effect_key, e.result, e.inserted_at)
                .where(e.card_key == card_key, e.tenant == tenant, e.kind == kind)
                .order_by(e.inserted_at.desc()).limit(1)
            ).first()
        return None if row is None else LatestEffect(key=row[0], result=row[1], at=row[2])


def _settled(usage: UsageRecord, *, kept: bool) -> UsageRecord:
    return usage.model_copy(update={"status": "done", "kept": kept, "retry": usage.retry or not kept})
