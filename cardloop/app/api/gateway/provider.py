"""The provider side of a call: forward the prepared conversation (whole, or as a live stream),
record usage and cost, and turn a provider failure into the caller's status."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

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
from cardloop.integrations.providers import Completion, StreamingProvider, StreamStart, TextDelta
from cardloop.integrations.upstream import UpstreamError
from cardloop.store import UsageRecord


def _provider_failed(call_id: str, tenant: str, err: UpstreamError) -> None:
    logger.warning("gateway/%s tenant %s: provider failed (%s, status %s): %s", call_id, tenant, err.kind,
                   err.status, err)


def complete(svc: Services, tenant: str, call: GatewayCall, call_id: str,
             prepared: Prepared | None = None) -> Outcome:
    """Layer, forward, record: the blocking part of one gateway call."""
    p = prepared or prepare(svc, tenant, call)
    profile = svc.config.profiles[p.profile]
    try:
        provider = svc.runtime.provider(p.profile)
        done = provider.complete(p.conversation, model=profile.model, max_tokens=p.max_tokens,
                                 temperature=p.temperature)
    except UpstreamError as err:
        _provider_failed(call_id, tenant, err)
        raise from_provider_error(err) from None
    _record_usage(svc, tenant, call_id, p.profile, profile.provider, profile.model, done)
    return Outcome(done, call_id, call.model_label or profile.model, p.redactions, p.warnings)


def open_stream(svc: Services, tenant: str, call: GatewayCall, call_id: str, p: Prepared) -> LiveStream | None:
    """Start the provider's stream and wait for it to accept the call; None when it cannot stream.

    Waiting for the first event (StreamStart) here, before any byte of the response, is what lets
    a refusal (429, 529, 400...) still answer with the plain HTTP error the caller expects.
    """
    profile = svc.config.profiles[p.profile]
    try:
        provider = svc.runtime.provider(p.profile)
        if not isinstance(provider, StreamingProvider):
            return None
        events = iter(provider.stream(p.conversation, model=profile.model, max_tokens=p.max_tokens,
                                      temperature=p.temperature))
        first = next(events, None)
    except UpstreamError as err:
        _provider_failed(call_id, tenant, err)
        raise from_provider_error(err) from None
    if not isinstance(first, StreamStart):
        close = getattr(events, "close", None)
        if close is not None:
            close()
        logger.warning("gateway/%s: provider stream opened with %r", call_id, type(first).__name__)
        raise from_provider_error(UpstreamError("stream did not start", kind="bad_response", retryable=True))

    def finish(done: Completion) -> None:
        _record_usage(svc, tenant, call_id, p.profile, profile.provider, profile.model, done)

    def fail(err: UpstreamError) -> GatewayError:
        _provider_failed(call_id, tenant, err)
        return from_provider_error(err)

    return LiveStream(events, first, finish, fail, call_id, call.model_label or profile.model)


def live_events(live: LiveStream) -> Iterator[str | Completion | GatewayError]:
    """The provider's stream as text deltas, then its Completion (usage recorded) or a GatewayError."""
    try:
        for event in live.events:
            if isinstance(event, TextDelta):
                if event.text:
                    yield event.text
            elif isinstance(event, Completion):
                live.finish(event)
                yield event
                return
        # The provider's iterator ended without its final event: a cut stream, never a silent end.
        yield live.fail(UpstreamError("provider stream ended before its final event", kind="bad_response",
                                      retryable=True))
    except UpstreamError as err:
        yield live.fail(err)
    finally:
        close = getattr(live.events, "close", None)
        if close is not None:
            close()  # a caller that hung up: release the provider's connection now


def _record_usage(svc: Services, tenant: str, call_id: str, profile: str, provider: str, model: str,
                  done: Completion) -> None:
    u = done.usage
    try:
        svc.store.record_usage(UsageRecord(
            call_key=f"gateway/{call_id}", card_key=f"{tenant}/gateway/-", tenant=tenant, stage=STAGE,
            profile=profile, provider=provider, model=done.model or model, purpose="turn",
            input_tokens=u.input_tokens, output_tokens=u.output_tokens, cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens, cost_usd=svc.runtime.cost(model, u),
            created_at=datetime.fromtimestamp(svc.clock(), UTC)))
    except Exception:
        logger.exception("gateway/%s tenant %s: usage not recorded (%s)", call_id, tenant, u)


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
