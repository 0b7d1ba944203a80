"""The guard model at PUT time: the third layer of tenant prompt validation, when
`[tenant_prompts] guard_profile` names a profile (prompts/injection/guard.py builds the question
and reads the answer; the profile's provider, from the same provider layer the stages use, asks).

Called only for a prompt the offline layers passed, once per PUT (rollback copies a version the
guard already read). A guard that rejects answers 400 like the validator; a guard that cannot be
asked or whose reply cannot be read answers 503: either way nothing is stored, since a guard that
did not say "allow" has not allowed anything. The call passes the tenant's spend limits first
(429 with Retry-After when over) and is recorded in the ledger, like a gateway call.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from decimal import Decimal

from fastapi import HTTPException

from cardloop.app.api.services import Services
from cardloop.contracts import metrics
from cardloop.contracts.limits import NO_RESERVATION, limits_for
from cardloop.integrations.providers.registry import build_provider
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.injection.guard import GuardReplyError, GuardVerdict, guard_conversation, parse_guard_reply
from cardloop.store import GuardRecord, UsageRecord

STAGE = "prompt-guard"  # the ledger's stage for guard calls (the gateway's is "gateway")

log = logging.getLogger(__name__)


def guard_check(svc: Services, tenant: str, text: str) -> tuple[GuardVerdict, GuardRecord] | None:
    """The guard's verdict on `text` and the record to store with the version; None when no guard
    profile is configured. HTTPException(503) when the guard cannot give a verdict."""
    settings = svc.config.tenant_prompts
    profile = settings.guard_profile
    if not profile:
        return None
    prof = svc.config.profiles[profile]
    key = svc.config.api_key(profile)
    row = _admit(svc, tenant, profile, text)
    try:
        # A client of its own, with the guard's timeout (the stages' clients wait up to 600 s);
        # PUTs are rare, so it is built per call and closed after.
        provider = build_provider(prof.provider, api_key=key.reveal() if key else None,
                                  base_url=svc.runtime.base_urls.get(profile) or prof.base_url,
                                  timeout=settings.guard_timeout_seconds)
        try:
            done = provider.complete(guard_conversation(text), model=prof.model,
                                     max_tokens=settings.guard_max_tokens, temperature=0.0)
        finally:
            close = getattr(provider, "close", None)
            if close is not None:
                close()
    except UpstreamError as err:
        metrics.MODEL_CALLS.labels(STAGE, prof.model, "error").inc()
        _settle(svc, row.model_copy(update={"status": "failed"}))
        log.warning("tenant %s: guard model (profile %s) failed: %s", tenant, profile, err)
        hint = f" (set {prof.api_key_env})" if key is None and prof.api_key_env else ""
        raise HTTPException(503, f"the guard model (profile {profile!r}) could not be asked: {err}{hint}; "
                                 "nothing was stored, try again") from None
    u = done.usage
    cost = Decimal(str(svc.runtime.cost(row.model, u)))
    # Counted by this process in the worker's counters (stage "prompt-guard"), with the configured model.
    metrics.billed(STAGE, prof.model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                   cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens, cost_usd=cost)
    _settle(svc, row.model_copy(update={
        "status": "done", "model": done.model or row.model, "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens, "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens, "cost_usd": cost}))
    try:
        verdict = parse_guard_reply(done.text)
    except GuardReplyError as err:
        log.warning("tenant %s: guard model (profile %s) gave no verdict: %s", tenant, profile, err)
        raise HTTPException(503, f"the guard model (profile {profile!r}) gave no verdict: {err}; "
                                 "nothing was stored, try again") from None
    return verdict, GuardRecord(verdict.verdict, verdict.reason, done.model or prof.model)


def _admit(svc: Services, tenant: str, profile: str, text: str) -> UsageRecord:
    """The guard's call counts against the tenant's spend limits like its cards' and gateway
    calls: checked before the call (429 with Retry-After when over, nothing stored), recorded in
    the ledger after it, so PUTs cannot spend the operator's model account without limit."""
    prof = svc.config.profiles[profile]
    row = UsageRecord(call_key=f"guard/{uuid.uuid4().hex}", card_key=f"{tenant}/{STAGE}/-", tenant=tenant,
                      stage=STAGE, profile=profile, provider=prof.provider, model=prof.model, purpose="turn",
                      created_at=datetime.fromtimestamp(svc.clock(), UTC))
    limits = limits_for(svc.config, tenant)
    reserve = NO_RESERVATION
    if limits.active:  # the question is the guard's frame around the prompt: counted only when it matters
        settings = svc.config.tenant_prompts
        prompt_tokens = svc.runtime.prompt_tokens(prof.model, guard_conversation(text))
        reserve = svc.runtime.reservation(prof.model, prompt_tokens, settings.guard_max_tokens)
    try:
        refusal = svc.store.admit_call(row, limits, reserve)
    except Exception:
        log.exception("tenant %s: the spend limits could not be checked for the guard model", tenant)
        raise HTTPException(503, "the spend limits cannot be checked right now; nothing was stored, retry later",
                            headers={"Retry-After": "5"}) from None
    if refusal is not None:
        raise HTTPException(429, f"the guard model's call was refused: {refusal.message}; nothing was stored",
                            headers={"Retry-After": str(refusal.retry_after_seconds)})
    return row


def _settle(svc: Services, row: UsageRecord) -> None:
    try:
        svc.store.settle_call(row)
    except Exception:  # the verdict stands; the ledger row stays "calling" and says so
        log.exception("%s tenant %s: the guard call's ledger row was not settled", row.call_key, row.tenant)
