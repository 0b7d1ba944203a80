"""Delivery ids of webhooks and transitions already seen: a board that redelivers is answered
"duplicate" instead of applying the event twice."""

from __future__ import annotations

from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.values import check_tenant


class DeliveriesMixin(StoreBase):
    def record_delivery(self, tenant: str, source: str, delivery_id: str) -> bool:
        """Remember a webhook/transition delivery id; False when it was seen before."""
        self._tenant(check_tenant(tenant))
        check_text("source", source, 100, required=True)
        check_text("delivery_id", delivery_id, 300, required=True)
        with self._db.write(tenant) as conn:
            return self._insert_new(
                conn, s.deliveries, {"tenant": tenant, "source": source, "delivery_id": delivery_id}
            )
