"""Deliveries already applied: a board that redelivers, or anybody replaying a signed body, is
answered "duplicate" instead of applying the event twice. This table is the source of truth
(a card workflow remembers only its last few hundred ids): the webhook checks it before it
hands an event to Temporal and records the key only once Temporal accepted the event, so a
delivery that failed on the way (503) is applied when it comes again."""

from __future__ import annotations

from sqlalchemy import select

from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.values import check_tenant


class DeliveriesMixin(StoreBase):
    def _delivery_values(self, tenant: str, source: str, delivery_id: str) -> dict[str, str]:
        self._tenant(check_tenant(tenant))
        check_text("source", source, 100, required=True)
        check_text("delivery_id", delivery_id, 300, required=True)
        return {"tenant": tenant, "source": source, "delivery_id": delivery_id}

    def record_delivery(self, tenant: str, source: str, delivery_id: str) -> bool:
        """Remember a webhook/transition delivery id; False when it was seen before."""
        values = self._delivery_values(tenant, source, delivery_id)
        with self._db.write(tenant) as conn:
            return self._insert_new(conn, s.deliveries, values)

    def delivery_seen(self, tenant: str, source: str, delivery_id: str) -> bool:
        """Whether record_delivery already remembered this id."""
        values = self._delivery_values(tenant, source, delivery_id)
        c = s.deliveries.c
        with self._db.read(tenant) as conn:
            row = conn.execute(select(c.delivery_id).where(
                c.tenant == values["tenant"], c.source == values["source"], c.delivery_id == values["delivery_id"],
            )).first()
        return row is not None
