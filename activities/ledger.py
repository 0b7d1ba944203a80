"""Every provider call in the ledger, per attempt, so the ledger matches the provider's bill.

`billed_call` checks the tenant's spend limits and opens the attempt's row before the request
leaves ("calling", holding the call's reservation against the token and cost caps: a worker
killed mid-call leaves it so, billed with usage unknown, still holding it), makes the
call while the activity heartbeats, and settles the row with the provider's usage in the call's own thread, so an
attempt that Temporal cancelled or gave up on is billed when its answer comes back. Whether
the result is kept (the turn's own usage) is decided when it is recorded (store/ledger.py).

An answer that came back is kept in memory (activities/received.py) until the caller recorded
it and calls `recorded`: when the store could not take it, the retried attempt on this worker
records that answer instead of calling the provider again (which would bill it twice). The
row is settled with the store's patience (activities/heartbeat.py), and the metrics count the
call when the answer arrives, whether or not the store takes it then."""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import from_provider, limit_refused
from cardloop.activities.heartbeat import call_with_heartbeat, retry_unavailable, store_patience
from cardloop.contracts import metrics
from cardloop.contracts.limits import Reservation, limits_for
from cardloop.contracts.names import LEDGER_KEPT
from cardloop.contracts.payloads import KeptInput, KeptUsage
from cardloop.integrations.providers import Provider
from cardloop.integrations.providers.base import Completion, with_usage
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.conversation import Conversation
from cardloop.store import UsageRecord
from cardloop.store.values import TIMED_OUT


def provider_for(rt: ActivityDeps, profile: str) -> Provider:
    """The profile's client; a profile that cannot be used (no API key) fails the activity at once."""
    try:
        return rt.provider(profile)
    except UpstreamError as err:
        raise from_provider(err) from None


def billed_call(rt: ActivityDeps, row: UsageRecord, call: Callable[[], Completion], *,
                detail: str, reserve: Reservation, conversation: Conversation | None = None
                ) -> tuple[Completion, UsageRecord]:
    """(the completion, its settled ledger row); a provider error is settled "failed" and
    raised as the activity's ApplicationError. The tenant's spend limits are checked first, in
    the transaction that opens the row: a refused call is recorded "refused" and never made; an
    admitted one holds `reserve` (rt.reservation) against the caps until it is settled.
    An answer an earlier attempt on this worker received but could not store is returned
    instead, without a call (the caller's record settles its row)."""
    held = rt.received.get(row.card_key, row.call_key)
    if held is not None:
        activity.logger.info("model call %s: using the answer received by attempt %d, not stored then",
                             row.call_key, held[1].attempt)
        return held
    refusal = rt.store.admit_call(row, limits_for(rt.config, row.tenant), reserve)
    if refusal is not None:
        activity.logger.warning("model call refused: %s", refusal.message)
        raise limit_refused(refusal, rt.config.retry)
    store = rt.store.inner  # used from the call's thread, which the activity thread waits on
    # Set when the activity is cancelled (its stage was cancelled or moved on) while the call
    # runs: the answer that still arrives is billed all the same, and settled "cancelled".
    stop = threading.Event()
    # Read here: the activity's context is this thread's.
    patience = store_patience(getattr(rt.store, "patience", 0.0))

    def settle(record: UsageRecord) -> None:
        retry_unavailable(lambda: store.settle_call(record), patience=patience, what=f"settling {row.call_key}")

    def call_and_settle() -> tuple[Completion, UsageRecord]:
        try:
            done = call()
        except UpstreamError as err:
            metrics.MODEL_CALLS.labels(row.stage, row.model, "error").inc()
            # No answer in time, none at all (a 408 is the server's: it never read the request):
            # the provider may have run and billed it, so its usage is unknown, not zero.
            unknown = err.kind == "timeout" and err.status is None
            settle(row.model_copy(update={"status": "failed", "note": TIMED_OUT if unknown else None}))
            raise
        except Exception as exc:
            # Not a classified failure (a bug reading the answer): the row still closes, so it
            # never stays "calling", which card show reads as lost with its worker.
            metrics.MODEL_CALLS.labels(row.stage, row.model, "error").inc()
            settle(row.model_copy(update={"status": "failed", "note": f"unexpected error: {type(exc).__name__}"}))
            raise
        done, note = with_usage(done, conversation, rt.assembler.counter.count)
        u = done.usage
        # Read once: the row and the metrics must say the same of a call cancelled mid-flight.
        cancelled = stop.is_set()
        billed = row.model_copy(update={
            "status": "cancelled" if cancelled else "done", "model": done.model or row.model, "note": note,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens, "cost_usd": Decimal(str(rt.cost(row.model, u)))})
        rt.received.put(row.card_key, row.call_key, (done, billed))
        # Labelled with the configured model (a bounded set), not the provider's dated id.
        metrics.billed(row.stage, row.model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                       cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens,
                       cost_usd=billed.cost_usd, result="cancelled" if cancelled else "ok")
        settle(billed)
        return done, billed

    try:
        return call_with_heartbeat(call_and_settle, detail=detail, stop=stop)
    except UpstreamError as err:
        activity.logger.warning("model call failed (%s): %s", err.kind, err)
        raise from_provider(err, rt.config.retry) from None


def recorded(rt: ActivityDeps, card_key: str, call_key: str) -> None:
    """The call's result is in the store (recorded now or by an earlier attempt): its answer
    need not be kept in memory any longer."""
    rt.received.discard(card_key, call_key)


class LedgerActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name=LEDGER_KEPT)
    def kept(self, inp: KeptInput) -> KeptUsage:
        """The kept calls under `inp.key`: a read, no side effect (its answer is in the history)."""
        paid = self.rt.store.kept_usage_under(inp.card_key, inp.key)
        return KeptUsage(calls=paid.calls, input_tokens=paid.input_tokens, output_tokens=paid.output_tokens,
                         cache_read_tokens=paid.cache_read_tokens, cache_write_tokens=paid.cache_write_tokens,
                         cost_usd=float(paid.cost_usd))
