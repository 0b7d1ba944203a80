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
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.injection.guard import GuardReplyError, GuardVerdict, guard_conversation, parse_guard_reply
from cardloop.store import GuardRecord

log = logging.getLogger(__name__)


def guard_check(svc: Services, tenant: str, text: str) -> tuple[GuardVerdict, GuardRecord] | None:
    """The guard's verdict on `text` and the record to store with the version; None when no guard
    profile is configured. HTTPException(503) when the guard cannot give a verdict."""
    profile = svc.config.tenant_prompts.guard_profile
    if not profile:
        return None
    prof = svc.config.profiles[profile]
    try:
        done = svc.runtime.provider(profile).complete(
            guard_conversation(text), model=prof.model, max_tokens=svc.config.tenant_prompts.guard_max_tokens,
            temperature=0.0)
        verdict = parse_guard_reply(done.text)
    except UpstreamError as err:
        log.warning("tenant %s: guard model (profile %s) failed: %s", tenant, profile, err)
        raise HTTPException(503, f"the guard model (profile {profile!r}) could not be asked: {err}; "
                                 "nothing was stored, try again") from None
    except GuardReplyError as err:
        log.warning("tenant %s: guard model (profile %s) gave no verdict: %s", tenant, profile, err)
        raise HTTPException(503, f"the guard model (profile {profile!r}) gave no verdict: {err}; "
                                 "nothing was stored, try again") from None
    return verdict, GuardRecord(verdict.verdict, verdict.reason, done.model or prof.model)
