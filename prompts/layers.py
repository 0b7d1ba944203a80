"""The layered system prompt and its precedence model.

    1. Core guardrails: platform text (templates/guardrails.md), always first, never removed.
    2. Behaviour, resolved by precedence, highest first:
         request-level system messages
         > tenant custom prompt in `replace_behavior` mode
         > profile system prompt
         > global system prompt (templates/global.md)
         > provider default ("You are a helpful assistant.")
       The highest layer present is the base; every lower one is reported as overridden.
       A tenant prompt in `append` mode (the default) is added after the resolved base.
    3. The stage's agent prompt (templates/agents/<stage>.md), a system block of its own.

Tenant text is validated again here (defence in depth: a stored prompt may predate a new
rule); a rejected tenant prompt is dropped and `explain` says why. A request's system text is
no more trusted than a tenant's (a gateway caller's own application wrote it): it passes the
same rules (`validate_request_system`, no length limit) and is dropped the same way when
rejected; the gateway refuses such a request with a 400 before it gets here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from cardloop.prompts.card import TenantPrompt
from cardloop.prompts.explain import ExplainRow
from cardloop.prompts.settings import AssemblySettings, PromptSource
from cardloop.prompts.validate import (
    ValidationResult,
    ValidationStatus,
    validate_request_system,
    validate_tenant_prompt,
)

GUARDRAILS_TEMPLATE = "guardrails"
GLOBAL_TEMPLATE = "global"


@dataclass(frozen=True, slots=True)
class BehaviourCandidate:
    name: str
    text: str
    source: str


@dataclass(frozen=True, slots=True)
class ResolvedBehaviour:
    base: BehaviourCandidate | None
    appended: BehaviourCandidate | None
    rows: tuple[ExplainRow, ...]  # tokens filled in by the assembler


@lru_cache(maxsize=1024)
def _validate(text: str) -> ValidationResult:
    # The same tenant prompt is checked on every turn of every card of the tenant.
    return validate_tenant_prompt(text)


@lru_cache(maxsize=64)  # a request's system text may be large: keep few
def request_verdict(text: str) -> ValidationResult:
    """`validate_request_system`, cached: a gateway caller sends the same system text with every
    call of its application, and the gateway checks it before the assembler checks it again."""
    return validate_request_system(text)


def tenant_text(tenant: TenantPrompt) -> str:
    """The tenant's prompt with its language and tone preferences as plain instructions."""
    parts = [tenant.custom_system_prompt.strip()]
    if tenant.language_preference and tenant.language_preference != "auto":
        parts.append(f"Answer in this language: {tenant.language_preference}.")
    if tenant.tone_profile:
        tone = "; ".join(f"{k}: {v}" for k, v in sorted(tenant.tone_profile.items()))
        parts.append(f"Tone: {tone}.")
    return "\n\n".join(p for p in parts if p)


def resolve_behaviour(
    *,
    settings: AssemblySettings,
    global_prompt: PromptSource | None,
    tenant: TenantPrompt | None,
    tenant_id: str,
    request_system: str | None,
    found: Counter[str] | None = None,
) -> ResolvedBehaviour:
    """Apply the precedence rules; rows report every candidate, used or not."""
    rows: list[ExplainRow] = []
    tenant_candidate: BehaviourCandidate | None = None
    tenant_mode = tenant.override_mode if tenant else None
    text = tenant_text(tenant) if tenant is not None else ""
    if text:
        verdict = _validate(text)
        label = f"tenant ({tenant_mode})"
        if verdict.status == ValidationStatus.REJECTED:
            why = "; ".join(f"{i.category}: {i.message}" for i in verdict.issues[:3])
            rows.append(ExplainRow("system", label, f"tenant {tenant_id}", "rejected", 0,
                                   f"failed validation, left out: {why}"))
        else:
            tenant_candidate = BehaviourCandidate(label, verdict.sanitized_prompt, f"tenant {tenant_id}")

    request_candidate: BehaviourCandidate | None = None
    if request_system and request_system.strip():
        verdict = request_verdict(request_system.strip())
        if verdict.status == ValidationStatus.REJECTED:
            why = "; ".join(f"{i.category}: {i.message}" for i in verdict.issues[:3])
            rows.append(ExplainRow("system", "request", "request system message", "rejected", 0,
                                   f"failed validation, left out: {why}"))
        else:
            request_candidate = BehaviourCandidate("request", verdict.sanitized_prompt, "request system message")
    ordered: list[tuple[str, BehaviourCandidate | None]] = [
        ("request", request_candidate),
        ("tenant (replace_behavior)", tenant_candidate if tenant_mode == "replace_behavior" else None),
        ("profile", BehaviourCandidate("profile", settings.profile_prompt.text.strip(),
                                       settings.profile_prompt.source)
         if settings.profile_prompt and settings.profile_prompt.text.strip() else None),
        ("global", BehaviourCandidate("global", global_prompt.text.strip(), global_prompt.source)
         if global_prompt and global_prompt.text.strip() else None),
        ("provider default", BehaviourCandidate("provider default",
                                                settings.provider_default.text.strip(),
                                                settings.provider_default.source)),
    ]
    base: BehaviourCandidate | None = None
    for label, cand in ordered:
        if cand is None:
            if label == "request" and request_system and request_system.strip():
                continue  # present but rejected: its row says so
            if label != "tenant (replace_behavior)" or tenant_mode == "replace_behavior":
                rows.append(ExplainRow("system", label, "-", "absent", 0, "not set"))
            continue
        if base is None:
            base = cand
            rows.append(ExplainRow("system", label, cand.source, "used", 0,
                                   "highest behaviour layer present: the base"))
        else:
            rows.append(ExplainRow("system", label, cand.source, "overridden", 0,
                                   f"a higher layer is present: {base.name}"))
    appended = tenant_candidate if tenant_mode == "append" else None
    if appended is not None:
        rows.append(ExplainRow("system", appended.name, appended.source, "used", 0,
                               "append mode: added after the resolved base"))
    return ResolvedBehaviour(base, appended, tuple(rows))
