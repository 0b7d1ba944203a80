"""Acting on cards as a board does: import a card, move it to a column, comment on it, read
its state. A move or comment reaches the card's open run, or starts one that carries the state
the last run closed with (see _deliver); each carries a delivery id so a repeat is applied once."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.service import RPCError, RPCStatusCode

from cardloop.app.temporal import TemporalLink, TemporalUnavailable
from cardloop.contracts import names
from cardloop.contracts.config import Config
from cardloop.contracts.errors import InputError, RejectedError
from cardloop.contracts.payloads import (
    CancelRequest,
    CardComment,
    CardRef,
    CardStart,
    CardState,
    Retitle,
    RetryRequest,
    StageProgress,
    StageRun,
    Transition,
)
from cardloop.contracts.retry import words
from cardloop.prompts.card import Card
from cardloop.prompts.scrub import redact_text
from cardloop.store import Store
from cardloop.workflows.card import CardWorkflow
from cardloop.workflows.card_view import CARD_STAGE, CARD_STATUS, search_attributes


def ref_for(card: Card) -> CardRef:
    """The card's ref; its id is the board's, encoded for the key by CardRef.for_board."""
    return CardRef.for_board(card.tenant, card.board, card.id)


# How long a reader (`card show`, `card list`) waits for a worker to answer the state query
# before it falls back to what Temporal itself holds (describe: search attributes).
QUERY_TIMEOUT = 5.0


@dataclass(frozen=True)
class DescribedCard:
    """A card workflow as Temporal describes it, with no worker: its search attributes (the
    workflow upserts CardStage and CardStatus as the card moves) and its execution status."""

    stage: str | None
    status: str | None  # CardStatus: new, running, idle, failed, blocked, done
    execution: str  # RUNNING, COMPLETED, ...
    note: str  # why this is all there is ("no worker answered ...")


class NoWorkerAnswered(Exception):
    """A query that no worker answered in time (none polls the task queue, or all are busy)."""


# A retry needs a worker to answer (the card workflow checks that the card failed): a CLI
# user waits longer than a board would.
RETRY_TIMEOUT = 30.0
# Temporal's failure for an update accepted by a run that closed before answering it.
_CLOSED_FIRST = "Workflow completed before the Update completed"
_CLOSED_WORDS = {WorkflowExecutionStatus.COMPLETED: "completed", WorkflowExecutionStatus.FAILED: "failed",
                 WorkflowExecutionStatus.CANCELED: "was cancelled",
                 WorkflowExecutionStatus.TERMINATED: "was terminated", WorkflowExecutionStatus.TIMED_OUT: "timed out"}
BUSY_RETRY_SECONDS = 5.0  # how long an update refused with names.TRY_AGAIN is asked again
_STALE_WAIT = re.compile(r", next in [^,)]+")


class CardService:
    """`client`: a connected Client (CLI, tests), or the API's TemporalLink, which may still be
    connecting; either way every call that a webhook waits on is bounded by temporal.rpc_timeout."""

    def __init__(self, client: Client | TemporalLink, store: Store, config: Config) -> None:
        self.link = client if isinstance(client, TemporalLink) else TemporalLink(config, client)
        self.store = store
        self.config = config

    @property
    def client(self) -> Client:
        return self.link.client()

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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.link.timeout  # one bound for the signal and the start together
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            await self.link.call("the signal", lambda _: handle.signal(signal, arg))
            return handle
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        # _start may read the store (synchronous SQL): off the event loop, which serves the API too.
        start = await asyncio.to_thread(self._start, ref, fields)
        return await self.link.call("the workflow start", lambda client: client.start_workflow(
            CardWorkflow.run, start, id=ref.workflow_id, task_queue=self.config.temporal.task_queue,
            start_signal=signal, start_signal_args=[arg],
            search_attributes=search_attributes(start, "new", status="new"),
            static_summary=f"card {ref.key}: {start.title[:200]}",
            memo={"title": start.title, "url": start.url or ""},
        ), timeout=max(deadline - loop.time(), 0.5))

    async def move(self, ref: CardRef, to: str, *, delivery_id: str | None = None, actor: str | None = None,
                   reason: str | None = None, fields: Card | None = None) -> WorkflowHandle:
        t = Transition(to=to, delivery_id=delivery_id or f"cli/{uuid.uuid4()}", actor=actor, reason=reason)  # type: ignore[arg-type]
        return await self._deliver(ref, names.SIGNAL_TRANSITION, t, fields)

    async def say(self, ref: CardRef, text: str, *, author: str | None = None,
                  delivery_id: str | None = None, fields: Card | None = None) -> WorkflowHandle:
        c = CardComment(delivery_id=delivery_id or f"cli/{uuid.uuid4()}", author=author, text=text)
        return await self._deliver(ref, names.SIGNAL_COMMENT, c, fields)

    async def retitle(self, ref: CardRef, card: Card) -> bool:
        """Tell the card's open run its new title and URL (its memo, which the Temporal UI lists,
        and its details); False when no run is open: the next one starts with the store's."""
        t = Retitle(title=redact_text(card.title), url=redact_text(card.url) if card.url else None)
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            await self.link.call("the signal", lambda _: handle.signal(names.SIGNAL_RETITLE, t))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True

    async def retry(self, ref: CardRef, *, actor: str | None = None, timeout: float = RETRY_TIMEOUT) -> str:
        """Run the card's failed stage again on its workflow (history kept); the stage's name.
        RejectedError when the card has not failed (the workflow says why)."""
        return await self._update(ref, "retry", names.UPDATE_RETRY, RetryRequest(actor=actor), str, timeout)

    async def cancel(self, ref: CardRef, *, actor: str | None = None, timeout: float = RETRY_TIMEOUT) -> StageRun:
        """Stop the card's running stage; its run as recorded once it stopped (messages, ledger
        rows and pushed commits are kept). RejectedError when no stage runs (the workflow says why)."""
        return await self._update(ref, "cancel", names.UPDATE_CANCEL, CancelRequest(actor=actor), StageRun, timeout)

    async def stop(self, ref: CardRef, *, actor: str | None, reason: str, update_id: str,
                   timeout: float = RETRY_TIMEOUT) -> None:
        """The same cancel as `cancel`, answered once the card's workflow took it, not once the
        stage stopped (a running command may take a while): for a board's delivery, whose sender
        waits seconds. `reason` is the run's recorded reason; `update_id` makes a second call
        for the same delivery one cancel (Temporal keeps one update per id). RejectedError when
        no stage runs (the workflow says why)."""
        await self._update(ref, "cancel", names.UPDATE_CANCEL, CancelRequest(actor=actor, reason=reason), StageRun,
                           timeout, update_id=update_id)

    async def _update(self, ref: CardRef, what: str, name: str, arg: Any, result_type: type, timeout: float,
                      update_id: str | None = None) -> Any:
        """The update's answer; one refused for a moment only (names.TRY_AGAIN: the run is starting,
        or between two steps for milliseconds) is asked again for up to BUSY_RETRY_SECONDS."""
        give_up = asyncio.get_running_loop().time() + BUSY_RETRY_SECONDS
        while True:
            try:
                return await self._update_once(ref, what, name, arg, result_type, timeout, update_id)
            except RejectedError as err:
                if not str(err).endswith(names.TRY_AGAIN) or asyncio.get_running_loop().time() > give_up:
                    raise
            await asyncio.sleep(0.1)

    async def _update_once(self, ref: CardRef, what: str, name: str, arg: Any, result_type: type, timeout: float,
                           update_id: str | None) -> Any:
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            if update_id is not None:
                return await self.link.call(f"the {what}", lambda _: handle.start_update(
                    name, arg, id=update_id, result_type=result_type,
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED), timeout=timeout)
            return await self.link.call(f"the {what}", lambda _: handle.execute_update(
                name, arg, result_type=result_type), timeout=timeout)
        except WorkflowUpdateFailedError as err:
            reason = getattr(err.cause, "message", None) or str(err.cause or err)
            if _CLOSED_FIRST in reason:  # Temporal's, not the card's: accepted, then the run closed
                raise RejectedError(f"card {ref.key}: nothing to {what}: it has no running workflow "
                                    f"({await self._closed_how(handle, ref)})") from None
            raise RejectedError(f"card {ref.key}: {reason}") from None
        except RPCError as err:
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                if await asyncio.to_thread(self.store.card_fields, ref.key) is None:
                    # A typo in the key, as `card show` and `card say` say it: bad input, not a refusal.
                    raise InputError(f"card {ref.key!r} is not known to the store {self.store.url}") from None
                # "aborted by closing": it arrived as the run's last task ran; "workflow execution
                # already completed": Temporal's words for a closed run, said in the card's.
                if "aborted by closing" in err.message or "execution already" in err.message:
                    why = await self._closed_how(handle, ref)
                # "workflow not found for ID: ..." says nothing a user can act on.
                elif "not found" in err.message:
                    why = "move the card to a stage to start one"
                else:
                    why = err.message
                raise RejectedError(f"card {ref.key}: nothing to {what}: it has no running workflow ({why})") from None
            raise
        except TemporalUnavailable as err:
            raise TemporalUnavailable(f"{err} (is a worker running on task queue "
                                      f"{self.config.temporal.task_queue}?)", err.reason) from None
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            # Temporal took the request, no worker answered it in time (the update is not applied
            # unless one takes it up later): one line and exit 2 / a 503, as for an unreachable server.
            raise TemporalUnavailable(
                f"card {ref.key}: no worker answered the {what} in time; is a worker running on task queue "
                f"{self.config.temporal.task_queue}? (`card show` says whether it was applied)",
                "no worker answered") from None

    async def _closed_how(self, handle: WorkflowHandle, ref: CardRef) -> str:
        """How the card's run closed when an update it had accepted, or was about to, was dropped
        (not applied). One that continued as new raises TRY_AGAIN: the update is asked of the new run."""
        status = (await self.link.call("describe", lambda _: handle.describe())).status
        if status == WorkflowExecutionStatus.RUNNING:
            raise RejectedError(f"card {ref.key}: its run continued as new; {names.TRY_AGAIN}")
        how = _CLOSED_WORDS.get(status, "closed") if status is not None else "closed"
        return f"its last run {how}; move the card to a stage to start one"

    async def retrying(self, ref: CardRef, state: CardState) -> str | None:
        """While the running stage's model call waits for its next attempt: why, in words
        ("retrying: cannot reach the model (attempt 3 of 8, next in 16 s)"), from the
        stage workflow's pending activity. None when nothing is being retried."""
        if state.status != "running" or not state.stage:
            return None
        stage = self.client.get_workflow_handle(f"{ref.workflow_id}/{state.stage_runs}-{state.stage}")
        try:
            described = await self.link.call("describe", lambda _: stage.describe())
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        for pending in described.raw_description.pending_activities:
            if pending.attempt <= 1 or not pending.HasField("last_failure"):
                continue
            text = await self._failure_message(pending.last_failure)
            if not text:
                continue
            if pending.HasField("next_attempt_schedule_time"):
                due = pending.next_attempt_schedule_time.ToDatetime(tzinfo=UTC)
                left = (due - datetime.now(UTC)).total_seconds()
                # The failure's own "next in 30 s" was true when it was raised; the live wait replaces it.
                text = _STALE_WAIT.sub("", text, count=1)
                text += f" [attempt {pending.attempt} " + (f"starts in {words(left)}]" if left > 0 else "running]")
            return text
        return None

    async def running_turn(self, ref: CardRef, state: CardState) -> StageProgress | None:
        """The running stage run's progress, from the run itself: the card's copy (state.current)
        arrives after each turn, so it is empty during the first and a turn behind later."""
        if state.status != "running" or not state.stage:
            return None
        stage = self.client.get_workflow_handle(f"{ref.workflow_id}/{state.stage_runs}-{state.stage}")
        try:
            return await self.link.call("the progress query", lambda _: stage.query(
                names.QUERY_PROGRESS, result_type=StageProgress))
        except (RPCError, WorkflowQueryFailedError):  # not started yet, or closed meanwhile
            return None

    async def _failure_message(self, failure: Any) -> str:
        """The failure's own message: with payload encryption on, the server holds only
        "Encoded failure" and the real message travels encrypted in encoded_attributes."""
        if not failure.HasField("encoded_attributes"):
            return str(failure.message)
        copy = type(failure)()
        copy.CopyFrom(failure)
        try:
            decoded = await self.client.data_converter.decode_failure(copy)
        except Exception:  # a key this client does not hold: say what the server says
            return str(failure.message)
        return str(getattr(decoded, "message", None) or decoded)

    async def state(self, ref: CardRef, *, timeout: float | None = None) -> CardState | None:
        """The card's state, as its workflow answers the query (a worker runs it); None when it
        has no workflow. With `timeout`: NoWorkerAnswered when no worker answered within it
        (without, the server's own deadline applies: about 30 s)."""
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            if timeout is None:
                return await handle.query(names.QUERY_STATE, result_type=CardState)
            return await asyncio.wait_for(handle.query(names.QUERY_STATE, result_type=CardState,
                                                       rpc_timeout=timedelta(seconds=timeout)), timeout + 1)
        except TimeoutError:
            raise NoWorkerAnswered(self._no_worker(timeout)) from None
        except RPCError as err:
            if timeout is not None:
                if err.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                    raise NoWorkerAnswered(self._no_worker(timeout)) from None
                if err.status == RPCStatusCode.FAILED_PRECONDITION and "poller" in err.message:
                    # The server knows no worker polls the queue: "no poller seen for task queue recently".
                    raise NoWorkerAnswered(self._no_worker(None, err.message)) from None
            # NOT_FOUND: never started. FAILED_PRECONDITION: its run closed (terminated, cancelled)
            # before it ran a single workflow task, so it has no state to answer with.
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                return None
            raise

    def _no_worker(self, timeout: float | None, server: str = "") -> str:
        within = f" within {timeout:g} s" if timeout is not None else f" (Temporal: {server})" if server else ""
        return (f"no worker answered the state query{within}; is a worker running on task queue "
                f"{self.config.temporal.task_queue}?")

    async def state_or_described(self, ref: CardRef, *, timeout: float = QUERY_TIMEOUT
                                 ) -> tuple[CardState | None, DescribedCard | None]:
        """(the state its workflow answers, None) or, when no worker answers within `timeout`,
        (None, what Temporal itself holds: describe() and the search attributes, which need no
        worker); (None, None) when the card has no workflow."""
        try:
            return await self.state(ref, timeout=timeout), None
        except NoWorkerAnswered as err:
            return None, await self.describe_card(ref, str(err))

    async def describe_card(self, ref: CardRef, note: str) -> DescribedCard | None:
        handle = self.client.get_workflow_handle(ref.workflow_id)
        try:
            described = await handle.describe(rpc_timeout=timedelta(seconds=self.link.timeout))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        attrs = described.typed_search_attributes
        execution = described.status.name if described.status is not None else "UNKNOWN"
        return DescribedCard(stage=attrs.get(CARD_STAGE), status=attrs.get(CARD_STATUS), execution=execution,
                             note=note)

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
