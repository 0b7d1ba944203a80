"""Every provider call in the ledger, per attempt, so the ledger matches the provider's bill.

`billed_call` checks the tenant's spend limits and opens the attempt's row before the request
leaves ("calling": a worker killed mid-call leaves it so, billed with usage unknown), makes the
call while the activity heartbeats, and settles the row with the provider's usage in the call's own thread, so an
attempt that Temporal cancelled or gave up on is billed when its answer comes back. Whether
the result is kept (the turn's own usage) is decided when it is recorded (store/ledger.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import from_provider, limit_refused
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.contracts import metrics
from cardloop.contracts.limits import limits_for
from cardloop.integrations.providers import Provider
from cardloop.integrations.providers.base import Completion
from cardloop.integrations.upstream import UpstreamError
from cardloop.store import UsageRecord


def provider_for(rt: ActivityDeps, profile: str) -> Provider:
    """The profile's client; a profile that cannot be used (no API key) fails the activity at once."""
    try:
        return rt.provider(profile)
    except UpstreamError as err:
        raise from_provider(err) from None


def billed_call(rt: ActivityDeps, row: UsageRecord, call: Callable[[], Completion], *,
                detail: str) -> tuple[Completion, UsageRecord]:
    """(the completion, its settled ledger row); a provider error is settled "failed" and
    raised as the activity's ApplicationError. The tenant's spend limits are checked first, in
    the transaction that opens the row: a refused call is recorded "refused" and never made."""
    refusal = rt.store.admit_call(row, limits_for(rt.config, row.tenant))
    if refusal is not None:
        activity.logger.warning("model call refused: %s", refusal.message)
        raise limit_refused(refusal, rt.config.retry)
    store = rt.store.inner  # used from the call's thread, which the activity thread waits on
    # Set when the activity is cancelled (its stage was cancelled or moved on) while the call
    # runs: the answer that still arrives is billed all the same, and settled "cancelled".
    stop = threading.Event()

    def call_and_settle() -> tuple[Completion, UsageRecord]:
        try:
            done = call()
        except UpstreamError:
            store.settle_call(row.model_copy(update={"status": "failed"}))
            metrics.MODEL_CALLS.labels(row.stage, row.model, "error").inc()
            raise
        u = done.usage
        billed = row.model_copy(update={
            "status": "cancelled" if stop.is_set() else "done", "model": done.model or row.model,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens, "cost_usd": Decimal(str(rt.cost(row.model, u)))})
        store.settle_call(billed)
        # Labelled with the configured model (a bounded set), not the provider's dated id.
        metrics.billed(row.stage, row.model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                       cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens,
                       cost_usd=billed.cost_usd)
        return done, billed

    try:
        return call_with_heartbeat(call_and_settle, detail=detail, stop=stop)
    except UpstreamError as err:
        activity.logger.warning("model call failed (%s): %s", err.kind, err)
        raise from_provider(err, rt.config.retry) from None
