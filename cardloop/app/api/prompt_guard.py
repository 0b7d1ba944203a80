"""The guard model at PUT time: the third layer of tenant prompt validation, when
`[tenant_prompts] guard_profile` names a profile (prompts/injection/guard.py builds the question
and reads the answer; the profile's provider, from the same provider layer the stages use, asks).

Called only for a prompt the offline layers passed, once per PUT (rollback copies a version the
guard already read). A guard that rejects answers 400 like the validator; a guard that cannot be
asked or whose reply cannot be read answers 503: either way nothing is stored, since a guard that
did not say "allow" has not allowed anything.
"""

from __future__ import annotations

import logging

from fastapi import HTTPException

from cardloop.app.api.services import Services
from cardloop.integrations.providers.registry import build_provider
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.injection.guard import GuardReplyError, GuardVerdict, guard_conversation, parse_guard_reply
from cardloop.store import GuardRecord

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
        verdict = parse_guard_reply(done.text)
    except UpstreamError as err:
        log.warning("tenant %s: guard model (profile %s) failed: %s", tenant, profile, err)
        hint = f" (set {prof.api_key_env})" if key is None and prof.api_key_env else ""
        raise HTTPException(503, f"the guard model (profile {profile!r}) could not be asked: {err}{hint}; "
                                 "nothing was stored, try again") from None
    except GuardReplyError as err:
        log.warning("tenant %s: guard model (profile %s) gave no verdict: %s", tenant, profile, err)
        raise HTTPException(503, f"the guard model (profile {profile!r}) gave no verdict: {err}; "
                                 "nothing was stored, try again") from None
    return verdict, GuardRecord(verdict.verdict, verdict.reason, done.model or prof.model)
