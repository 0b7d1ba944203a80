"""The card workflow's state at the moment a run closed: what the card's next run starts from.

Temporal runs one workflow of an id at a time, and a run saves its state before it closes,
so the next run (opened by a later move or comment) reads exactly the state the previous one
closed with. Reading it from the closed run instead (a query from the client) raced with runs
that closed and opened between the read and the start."""

from __future__ import annotations

from sqlalchemy import select, update

from cardloop.store import schema as s
from cardloop.store.base import StoreBase


class WorkflowStateMixin(StoreBase):
    def save_workflow_state(self, card_key: str, state_json: str) -> bool:
        """False when the card is not stored (nothing to attach the state to)."""
        tenant = self._card_tenant(card_key)
        c = s.cards.c
        with self._db.write(tenant) as conn:
            done = conn.execute(update(s.cards).where(c.card_key == card_key, c.tenant == tenant)
                                .values(workflow_state=state_json))
        return bool(done.rowcount)

    def workflow_state(self, card_key: str) -> str | None:
        tenant = self._card_tenant(card_key)
        c = s.cards.c
        with self._db.read(tenant) as conn:
            return conn.execute(select(c.workflow_state).where(c.card_key == card_key, c.tenant == tenant)
                                ).scalar_one_or_none()
