"""The provider side of a call: forward the prepared conversation (whole, or as a live stream),
record usage and cost, and turn a provider failure into the caller's status."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from cardloop.app.api.gateway.layering import prepare
from cardloop.app.api.gateway.models import (
    STAGE,
    GatewayCall,
    GatewayError,
    LiveStream,
    Outcome,
    Prepared,
    logger,
)
from cardloop.app.api.services import Services
from cardloop.contracts import metrics
from cardloop.contracts.limits import NO_RESERVATION, limits_for
from cardloop.integrations.providers import Completion, Provider, StreamingProvider, StreamStart, TextDelta, Usage
from cardloop.integrations.providers.base import with_usage
from cardloop.integrations.upstream import UpstreamError
from cardloop.store import UsageRecord


def _provider_failed(call_id: str, tenant: str, err: UpstreamError) -> None:
    logger.warning("gateway/%s tenant %s: provider failed (%s, status %s): %s", call_id, tenant, err.kind,
                   err.status, err)


def complete(svc: Services, tenant: str, call: GatewayCall, call_id: str,
             prepared: Prepared | None = None, *, token_id: str | None = None) -> Outcome:
    """Layer, check the limits, forward, record: the blocking part of one gateway call."""
    p = prepared or prepare(svc, tenant, call)
    profile = svc.config.profiles[p.profile]
    provider = _provider(svc, tenant, call_id, p.profile)
    row = admit(svc, tenant, call_id, p, token_id)
    try:
        done = provider.complete(p.conversation, model=profile.model, max_tokens=p.max_tokens,
                                 temperature=p.temperature)
    except UpstreamError as err:
        _provider_failed(call_id, tenant, err)
        _settle_failed(svc, row)
        raise from_provider_error(err) from None
    except Exception:
        _settle_failed(svc, row)  # an unclassified failure (a 500) still closes the call's row
        raise
    done, note = with_usage(done, p.conversation, svc.runtime.assembler.counter.count)
    _record_usage(svc, row, done, note=note)
    return Outcome(done, call_id, call.model_label or profile.model, p.redactions, p.warnings)


def open_stream(svc: Services, tenant: str, call: GatewayCall, call_id: str, p: Prepared, *,
                token_id: str | None = None) -> LiveStream | None:
    """Start the provider's stream and wait for it to accept the call; None when it cannot stream.

    Waiting for the first event (StreamStart) here, before any byte of the response, is what lets
    a refusal (429, 529, 400...) still answer with the plain HTTP error the caller expects.
    """
    profile = svc.config.profiles[p.profile]
    provider = _provider(svc, tenant, call_id, p.profile)
    if not isinstance(provider, StreamingProvider):
        return None
    row = admit(svc, tenant, call_id, p, token_id)
    try:
        events = iter(provider.stream(p.conversation, model=profile.model, max_tokens=p.max_tokens,
                                      temperature=p.temperature))
        first = next(events, None)
    except UpstreamError as err:
        _provider_failed(call_id, tenant, err)
        _settle_failed(svc, row)
        raise from_provider_error(err) from None
    except Exception:
        _settle_failed(svc, row)
        raise
    if not isinstance(first, StreamStart):
        close = getattr(events, "close", None)
        if close is not None:
            close()
        logger.warning("gateway/%s: provider stream opened with %r", call_id, type(first).__name__)
        _settle_failed(svc, row)
        raise from_provider_error(UpstreamError("stream did not start", kind="bad_response", retryable=True))

    ledger = StreamLedger(svc, row, first.usage, events, svc.runtime.assembler.counter.count)
    return LiveStream(events, first, ledger, call_id, call.model_label or profile.model)


def live_events(live: LiveStream) -> Iterator[str | Completion | GatewayError]:
    """The provider's stream as text deltas, then its Completion (usage recorded) or a GatewayError."""
    try:
        for event in live.events:
            if isinstance(event, TextDelta):
                if event.text:
                    live.ledger.delta(event.text)  # counted before it leaves: a hang-up after it pays for it
                    yield event.text
            elif isinstance(event, Completion):
                live.ledger.finish(event)
                yield event
                return
        # The provider's iterator ended without its final event: a cut stream, never a silent end.
        yield live.ledger.fail(UpstreamError("provider stream ended before its final event", kind="bad_response",
                                             retryable=True))
    except UpstreamError as err:
        yield live.ledger.fail(err)
    finally:
        live.ledger.close()  # a caller that hung up: release the provider's connection, bill what was used


class StreamLedger:
    """A live stream's ledger row, settled exactly once however the stream ends.

    The final event settles it "done" with the provider's usage. Any other end is settled with
    the usage known so far, never left "calling" (which would hold its reservation against the
    caps for the rest of the day, and bill nothing): the input side as the stream's
    start reported it, the output as the text forwarded so far (counted, at least one token a
    delta). "cancelled" when the caller went away, "failed" when the provider cut the stream.
    """

    def __init__(self, svc: Services, row: UsageRecord, started: Usage, events: Iterator[Any],
                 count: Callable[[str], int]) -> None:
        self._svc, self._row, self._started, self._events, self._count = svc, row, started, events, count
        self._sent: list[str] = []
        self._settled = False
        self._lock = threading.Lock()  # the response's close and the stream's own end run in worker threads

    def delta(self, text: str) -> None:
        self._sent.append(text)

    def finish(self, done: Completion) -> None:
        if self._claim():
            _record_usage(self._svc, self._row, done)

    def fail(self, err: UpstreamError) -> GatewayError:
        _provider_failed(self._row.call_key.removeprefix("gateway/"), self._row.tenant, err)
        if self._claim():
            self._settle_so_far("failed", f"the provider's stream failed ({err.kind}) before its final event")
        return from_provider_error(err)

    def close(self) -> None:
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()  # stops the provider's generation: nothing more is billed after this
        finally:
            if self._claim():
                self._settle_so_far("cancelled", "the caller left before the stream's final event")

    def _claim(self) -> bool:
        with self._lock:
            first, self._settled = not self._settled, True
            return first

    def _settle_so_far(self, status: Literal["failed", "cancelled"], why: str) -> None:
        sent = "".join(self._sent)
        output = max(self._started.output_tokens, self._count(sent), len(self._sent))
        usage = dataclasses.replace(self._started, output_tokens=output)
        logger.info("%s: %s; settled with the usage known so far (%s)", self._row.call_key, why, usage)
        _settle_usage(self._svc, self._row, usage, status=status, note=f"{why}; output counted from the text sent")


def _provider(svc: Services, tenant: str, call_id: str, profile: str) -> Provider:
    try:
        return svc.runtime.provider(profile)
    except UpstreamError as err:  # e.g. the profile's API key is not set
        _provider_failed(call_id, tenant, err)
        env_name = svc.config.profiles[profile].api_key_env
        if env_name and svc.config.api_key(profile) is None:
            # Not the provider's refusal: nothing was sent. The operator's to fix, not the caller's.
            raise GatewayError(503, f"this server has no API key for the gateway's model profile {profile!r} "
                                    f"(the operator sets {env_name}); no call was made to the model provider",
                               code="no_provider_key") from None
        raise from_provider_error(err) from None


def admit(svc: Services, tenant: str, call_id: str, p: Prepared, token_id: str | None) -> UsageRecord:
    """The tenant's (and the token's) spend limits, checked before the provider is called: the
    call's ledger row opened ("calling", holding the prompt's tokens plus its max_tokens, and
    their cost, against the token and cost caps until it is settled), or a 429 with Retry-After
    and a "refused" row. A store that cannot answer refuses the call too (503): limits are not
    skipped."""
    profile = svc.config.profiles[p.profile]
    limits = limits_for(svc.config, tenant)
    reserve = NO_RESERVATION
    if limits.active:  # counting the prompt costs time: only for a tenant with limits
        prompt_tokens = svc.runtime.prompt_tokens(profile.model, p.conversation)
        reserve = svc.runtime.reservation(profile.model, prompt_tokens, p.max_tokens)
    row = UsageRecord(call_key=f"gateway/{call_id}", card_key=f"{tenant}/gateway/-", tenant=tenant, stage=STAGE,
                      profile=p.profile, provider=profile.provider, model=profile.model, purpose="turn",
                      token_id=token_id, created_at=datetime.fromtimestamp(svc.clock(), UTC))
    try:
        refusal = svc.store.admit_call(row, limits, reserve)
    except Exception:
        logger.exception("gateway/%s tenant %s: the spend limits could not be checked", call_id, tenant)
        raise GatewayError(503, "the gateway cannot check its usage limits right now; retry later",
                           code="limits_unavailable", retry_after=5) from None
    if refusal is not None:
        logger.info("gateway/%s: refused: %s", call_id, refusal.message)
        # OpenAI's words: a rate limit is "rate_limit_exceeded", a spent budget "insufficient_quota".
        raise GatewayError(429, refusal.message, retry_after=refusal.retry_after_seconds,
                           code="rate_limit_exceeded" if refusal.kind == "rate" else "insufficient_quota")
    return row


def _settle_failed(svc: Services, row: UsageRecord) -> None:
    metrics.MODEL_CALLS.labels(row.stage, row.model, "error").inc()
    try:
        svc.store.settle_call(row.model_copy(update={"status": "failed"}))
    except Exception:
        logger.exception("%s: the failed call's ledger row was not settled", row.call_key)


def _record_usage(svc: Services, row: UsageRecord, done: Completion, note: str | None = None) -> None:
    _settle_usage(svc, row, done.usage, status="done", model=done.model, note=note)


def _settle_usage(svc: Services, row: UsageRecord, u: Usage, *, status: Literal["done", "failed", "cancelled"],
                  model: str | None = None, note: str | None = None) -> None:
    cost = Decimal(str(svc.runtime.cost(row.model, u)))
    # The worker's counters, counted by this process for its own calls (stage "gateway"), whether
    # or not the store takes the row: the provider billed them. The configured model: a bounded label.
    metrics.billed(row.stage, row.model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                   cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens, cost_usd=cost,
                   result="ok" if status == "done" else "error" if status == "failed" else status)
    try:
        svc.store.settle_call(row.model_copy(update={
            "status": status, "model": model or row.model, "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens, "cost_usd": cost, "note": note}))
    except Exception:
        logger.exception("%s tenant %s: usage not recorded (%s)", row.call_key, row.tenant, u)


def from_provider_error(err: UpstreamError) -> GatewayError:
    """A provider failure as the caller's status (see the module docstring)."""
    if err.kind == "rate_limited":
        return GatewayError(429, "the model provider is rate limiting this gateway; retry later",
                            code="rate_limited", retry_after=err.retry_after)
    if err.retryable:
        return GatewayError(503, f"the model provider is unavailable ({err.kind}); retry later", code=err.kind,
                            retry_after=err.retry_after)
    if err.kind in ("invalid_request", "blocked"):
        return GatewayError(400, err.message, code=err.kind)
    if err.kind == "too_large":
        return GatewayError(413 if err.status == 413 else 400, err.message, code="too_large")
    # auth (our key), spend_limit (our account), not_found (our configured model), anything new:
    # the caller can do nothing about these, and the provider's words are about our account.
    return GatewayError(502, f"the gateway's model provider refused the call ({err.kind}); "
                             "the operator has been told", code="upstream_" + err.kind)
