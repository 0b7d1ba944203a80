"""Cached summaries of a card's history ranges (RLM summarization), so every reader of a
range folds the same text and a longer range reuses a shorter one."""

from __future__ import annotations

from sqlalchemy import select

from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_range, check_text
from cardloop.store.values import StoreError, Summary


class SummariesMixin(StoreBase):
    def put_summary(
        self, card_key: str, first: int, last: int, model: str, text: str, tokens: int, method: str
    ) -> bool:
        """Cache a summary of messages first..last (inclusive). The first one stored for a
        (card, range, model) wins, so every reader folds the same text; False when it existed."""
        tenant = self._card_tenant(card_key)
        check_range(first, last)
        check_text("model", model, 200, required=True)
        check_text("method", method, 32, required=True)
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
        check_range(first, last)
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
