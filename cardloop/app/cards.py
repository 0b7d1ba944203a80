"""Acting on cards as a board does: import a card, move it to a column, comment on it, read
its state. A move or comment reaches the card's open run, or starts one that carries the state
the last run closed with (see _deliver); each carries a delivery id so a repeat is applied once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from temporalio.client import (
    Client,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from cardloop.contracts import names
from cardloop.contracts.config import Config
from cardloop.contracts.errors import InputError
from cardloop.contracts.payloads import CardComment, CardRef, CardStart, CardState, Transition
from cardloop.prompts.card import Card
from cardloop.prompts.scrub import redact_text
from cardloop.store import Store
from cardloop.workflows.card import CardWorkflow, search_attributes


def ref_for(card: Card) -> CardRef:
    """The card's ref; its id is the board's, encoded for the key by CardRef.for_board."""
    return CardRef.for_board(card.tenant, card.board, card.id)


class CardService:
    def __init__(self, client: Client, store: Store, config: Config) -> None:
        self.client = client
        self.store = store
        self.config = config

    def import_card(self, card: Card) -> CardRef:
        """Store the card's fields, history and context (history only if the store has none yet)."""
        ref = ref_for(card)
        self.store.upsert_card(ref.key, card)
        if self.store.message_count(ref.key) == 0:
            for i, message in enumerate(card.history):
                self.store.append_message(ref.key, message, dedup_key=f"import/{i}")
        if card.context:
            self.store.put_context_items(ref.key, card.context)
        return ref

    def _start(self, ref: CardRef, fields: Card | None = None) -> CardStart:
        # The webhook already read the card: pass it in instead of reading it again.
        card = fields if fields is not None else self.store.card_fields(ref.key)
        if card is None:
            raise InputError(f"card {ref.key!r} is not known; import it first with "
                             "`cardloop card move FILE.json --to STAGE`")
        # Title and URL go to the workflow's memo and details (the Temporal UI): redacted like a log.
        return CardStart(ref=ref, title=redact_text(card.title), url=redact_text(card.url) if card.url else None,
                         repo=card.repo,
                         max_history_events=self.config.temporal.continue_as_new_after_events)

    async def _deliver(self, ref: CardRef, signal: str, arg: Any, fields: Card | None = None) -> WorkflowHandle:
        """Signal the card's open run (one RPC, the common case); when there is none, start one
        with signal-with-start (which signals a run that opened meanwhile). A new run loads the
        state the last one closed with from the store itself: no state travels from here, so
        no run can start from a stale copy."""
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            await handle.signal(signal, arg)
            return handle
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        # _start may read the store (synchronous SQL): off the event loop, which serves the API too.
        start = await asyncio.to_thread(self._start, ref, fields)
        return await self.client.start_workflow(
            CardWorkflow.run, start, id=ref.workflow_id, task_queue=self.config.temporal.task_queue,
            start_signal=signal, start_signal_args=[arg],
            search_attributes=search_attributes(start, "new"),
            static_summary=f"card {ref.key}: {start.title[:200]}",
            memo={"title": start.title, "url": start.url or ""},
        )

    async def move(self, ref: CardRef, to: str, *, delivery_id: str | None = None, actor: str | None = None,
                   reason: str | None = None, fields: Card | None = None) -> WorkflowHandle:
        t = Transition(to=to, delivery_id=delivery_id or f"cli/{uuid.uuid4()}", actor=actor, reason=reason)  # type: ignore[arg-type]
        return await self._deliver(ref, names.SIGNAL_TRANSITION, t, fields)

    async def say(self, ref: CardRef, text: str, *, author: str | None = None,
                  delivery_id: str | None = None, fields: Card | None = None) -> WorkflowHandle:
        c = CardComment(delivery_id=delivery_id or f"cli/{uuid.uuid4()}", author=author, text=text)
        return await self._deliver(ref, names.SIGNAL_COMMENT, c, fields)

    async def state(self, ref: CardRef) -> CardState | None:
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            return await handle.query(names.QUERY_STATE, result_type=CardState)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    async def wait_for(self, ref: CardRef, done: Callable[[CardState], bool], *, timeout: float,
                       on_change: Callable[[CardState], None] | None = None, poll: float = 0.25) -> CardState:
        """Poll the card's state until `done` holds; TimeoutError after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: CardState | None = None
        while True:
            state = await self.state(ref)
            if state is not None:
                if on_change and (last is None or state.model_dump() != last.model_dump()):
                    on_change(state)
                last = state
                if done(state):
                    return state
            if loop.time() > deadline:
                raise TimeoutError(f"card {ref.key} did not reach the expected state in {timeout:.0f}s "
                                   f"(last: {last.model_dump() if last else 'no workflow'})")
            await asyncio.sleep(poll)
