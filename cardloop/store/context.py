"""A card's context items (build logs, reviews, source files...): replaced per source, their
contents kept once per tenant as blobs. Items are only ever read into prompts, so they are
stored redacted: content, title and source (a URL with a token in it is a secret too)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, delete, or_, select, update

from cardloop.prompts.card import ContextItem
from cardloop.store import schema as s
from cardloop.store.blobs import BlobsMixin, stored_text
from cardloop.store.sealing import BlobSealer, open_blob
from cardloop.store.values import blob_ref, decode_text


class ContextMixin(BlobsMixin):
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
        items = [stored_item(item) for item in items]
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
            rows = context_rows(conn, card_key, tenant)
        return [ContextItem.model_validate(context_dict(row, self._sealer)) for row in rows]


def stored_item(item: ContextItem) -> ContextItem:
    """`item` as the store keeps it: every text a prompt shows of it redacted."""
    # A marker may be longer than the short secret it replaces: keep the fields' limits.
    update = {"content": stored_text(item.content), "source": stored_text(item.source)[:500]}
    if item.title:
        update["title"] = stored_text(item.title)[:500]
    return item.model_copy(update=update)


def context_rows(conn: Connection, card_key: str, tenant: str) -> list[Row[Any]]:
    c, b = s.context_items.c, s.blobs.c
    query = (
        select(c.meta, b.ref, b.tenant, b.data)
        .join_from(s.context_items, s.blobs, (b.ref == c.content_ref) & (b.tenant == c.tenant))
        .where(c.card_key == card_key, c.tenant == tenant)
        .order_by(c.ord)
    )
    return list(conn.execute(query))


def context_dict(row: Row[Any], sealer: BlobSealer | None) -> dict[str, Any]:
    data = open_blob(sealer, row.tenant, row.ref, bytes(row.data))
    return json.loads(row.meta) | {"content": decode_text(data)}
