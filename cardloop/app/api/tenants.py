"""Tenant prompt management and API tokens.

    PUT    /tenants/{tenant_id}/prompt                      validate, store a new version (tenant token)
    GET    /tenants/{tenant_id}/prompt                      the current version + the effective system prompt
    DELETE /tenants/{tenant_id}/prompt                      no active prompt from now on (a version records it)
    GET    /tenants/{tenant_id}/prompt/versions             every version, oldest first
    GET    /tenants/{tenant_id}/prompt/versions/{version}   one version
    POST   /tenants/{tenant_id}/prompt/rollback             a new version copying an older one
    POST   /tenants/{tenant_id}/tokens                      issue a bearer token (admin token)
    GET    /tenants/{tenant_id}/tokens                      list the tenant's tokens (admin token)
    DELETE /tenants/{tenant_id}/tokens/{token_id}           revoke one (admin token)
    GET    /tenants/{tenant_id}/limits                      spend limits and usage per window (tenant or admin token)

Prompt routes take a bearer token of the tenant in the path; any other tenant's id answers 404
whatever is asked, so tenants cannot be probed. Every store call goes through
`store.for_tenant(tenant)`, so on PostgreSQL row-level security holds the request to its tenant
even if a query here were wrong.

Validation is the prompt core's (`cardloop.prompts.validate`: phrase patterns, then the trained injection
classifier of `cardloop.prompts.injection`), applied to what the prompt core will see:
the custom prompt, the language and tone values, and their combination (`cardloop.prompts.layers.tenant_text`,
which the core validates again on every turn). A REJECTED prompt answers 400 with its issues and
stores nothing; the stored text is the sanitized one. When `[tenant_prompts] guard_profile` is set, a
guard model then reads the combination (app/api/prompt_guard.py): its "reject" answers 400 (category
guard_model), its "allow" is stored with the version together with its reason and model.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cardloop.app.api.auth import (
    ADMIN_TOKEN_ENV,
    bearer_token,
    card_tenant,
    require_admin_path,
    require_tenant,
    require_tenant_path,
)
from cardloop.app.api.prompt_guard import guard_check
from cardloop.app.api.services import Services, services
from cardloop.contracts.config import Config
from cardloop.contracts.limits import limits_for, windows
from cardloop.prompts.assemble import AssemblyError, AssemblyRequest, PromptAssembler
from cardloop.prompts.card import Card, TenantPrompt
from cardloop.prompts.layers import tenant_text
from cardloop.prompts.surrogates import refuse_surrogates
from cardloop.prompts.validate import (
    MAX_TENANT_PROMPT_CHARS,
    ValidationIssue,
    ValidationResult,
    ValidationStatus,
    sanitize,
    validate_tenant_prompt,
)
from cardloop.store import MAX_PROMPT_VERSION, NotFoundError, Store, StoreError, TenantPromptVersion

router = APIRouter(prefix="/tenants", tags=["tenants"])

SvcDep = Annotated[Services, Depends(services)]
TenantDep = Annotated[str, Depends(require_tenant_path)]

# Bodies far beyond the validator's limit are refused by the model (422/400) before any
# validation work; up to this size the validator answers, naming the "length" issue.
HARD_MAX_CHARS = MAX_TENANT_PROMPT_CHARS * 4
MAX_TONE_ENTRIES = 20


# --------------------------------------------------------------------------- models


class _Body(BaseModel):
    # strict: a number is not a string, a string is not a number; extra: a typo is an error.
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        # An unpaired "\ud800" escape is no text the store (or an answer) could encode: 400 naming it.
        return refuse_surrogates(data)


class PromptIn(_Body):
    custom_system_prompt: str = Field(
        max_length=HARD_MAX_CHARS,
        description=f"The tenant's system prompt; REJECTED (400) over {MAX_TENANT_PROMPT_CHARS:,} characters "
                    "or when it tries to override the guardrails.",
    )
    override_mode: Literal["append", "replace_behavior"] = Field(
        default="append",
        description="append: added after the profile's behaviour prompt; replace_behavior: used instead of it. "
                    "The core guardrails always come first either way.",
    )
    language_preference: str = Field(default="auto", min_length=1, max_length=64,
                                     description='"auto", or the language answers should be in.')
    tone_profile: dict[str, str] = Field(default_factory=dict, max_length=MAX_TONE_ENTRIES,
                                         description='Tone settings, e.g. {"style": "terse"}.')

    @field_validator("tone_profile")
    @classmethod
    def _tone_sizes(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not 1 <= len(key) <= 64 or len(item) > 500:
                raise ValueError("tone_profile keys are 1-64 characters, values at most 500")
        problems = _tone_key_problems(value)
        if problems:
            raise ValueError("; ".join(problems) + f" ({CLEANUP}): send each key once, as the text it is")
        return value


CLEANUP = "invisible characters removed, compatibility forms normalized (NFKC), spaces trimmed"


def _tone_key_problems(tone: dict[str, str]) -> list[str]:
    """Tone keys are stored cleaned up as every tenant text is (`sanitize`): keys that become one
    key would silently keep only the last value, and a key that becomes empty names nothing."""
    by_clean: dict[str, list[str]] = {}
    for key in tone:
        by_clean.setdefault(sanitize(key), []).append(key)
    problems = []
    for clean, keys in by_clean.items():
        if len(keys) > 1:
            named = f"keys {', '.join(map(repr, keys[:-1]))} and {keys[-1]!r}"
            problems.append(f"tone_profile {named} are " + (f"one key, {clean!r}," if clean else "empty")
                            + " once cleaned up")
        elif not clean:
            problems.append(f"tone_profile key {keys[0]!r} is empty once cleaned up")
    return problems


class RollbackIn(_Body):
    version: int = Field(ge=1, le=MAX_PROMPT_VERSION, description="The version to copy into a new current version.")


class TokenIn(_Body):
    name: str = Field(min_length=1, max_length=200, description="What the token is for, e.g. 'ci'.")


class Issue(BaseModel):
    field: str = Field(description="custom_system_prompt, language_preference, tone_profile.<key>, or "
                                   "combined (the prompt with its language and tone, as the prompt core sees it)")
    category: str = Field(description="length, meta_override, safety_bypass, system_prompt_disclosure, "
                                      "role_reassignment, guardrail_impersonation, encoding, classifier "
                                      "(the trained injection classifier) or guard_model (the guard model, "
                                      "when one is configured)")
    message: str
    start: int = Field(description="Offset of the issue in the field's text (end exclusive).")
    end: int


class RejectedOut(BaseModel):
    detail: str
    validation_status: Literal["REJECTED"] = "REJECTED"
    issues: list[Issue]


class PromptVersionOut(BaseModel):
    tenant: str
    version: int
    deleted: bool
    custom_system_prompt: str = Field(description="As stored and used: the sanitized text.")
    override_mode: Literal["append", "replace_behavior"]
    language_preference: str
    tone_profile: dict[str, str]
    validation_status: Literal["VALID", "SANITIZED"] | None = Field(description="None on a deletion.")
    issues: list[dict[str, Any]] = Field(
        description="What validation cleaned up (SANITIZED): category, message, start and end, and the field "
                    "it applies to (as in a 400's issues; versions stored before fields were named have none).")
    restored_from: int | None = Field(description="The version a rollback copied.")
    guard_verdict: Literal["allow"] | None = Field(
        default=None, description="The guard model's verdict at PUT time; None when no guard model is configured.")
    guard_reason: str | None = Field(default=None, description="The guard model's reason for its verdict.")
    guard_model: str | None = Field(default=None, description="The model that gave the verdict.")
    created_by: str
    created_at: datetime

    @classmethod
    def of(cls, v: TenantPromptVersion) -> PromptVersionOut:
        return cls(**v.model_dump(exclude={"submitted_sha256"}))


class PromptOut(PromptVersionOut):
    effective_prompt: str = Field(
        description="The system prompt this tenant's cards get with the default profile: core guardrails, "
                    "then the behaviour layers with this prompt in place.")


class VersionsOut(BaseModel):
    tenant: str
    current_version: int | None
    versions: list[PromptVersionOut]


class TokenOut(BaseModel):
    id: str
    tenant: str
    name: str
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


class IssuedTokenOut(BaseModel):
    id: str
    tenant: str
    name: str
    created_at: datetime
    token: str = Field(description="The bearer token. Shown once: only its SHA-256 is stored.")


_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid bearer token"},
    404: {"description": "Not found, or another tenant's id"},
}


# --------------------------------------------------------------------------- validation


def _shown(text: str) -> str:
    """`text` with what does not print escaped (zero-width, soft hyphen, a lone surrogate), so a
    field named after a tone key says which key it was."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _issues(field: str, result: ValidationResult) -> list[Issue]:
    return [Issue(field=_shown(field), category=i.category, message=i.message, start=i.start, end=i.end)
            for i in result.issues]


def check_prompt(body: PromptIn) -> tuple[TenantPrompt, ValidationResult, list[Issue]]:
    """(the prompt to store, the verdict for the store, the issues): every text the tenant sends
    lands in the system prompt, so each is validated, then their combination as the core sees it."""
    issues: list[Issue] = []
    main = validate_tenant_prompt(body.custom_system_prompt)
    issues += _issues("custom_system_prompt", main)
    verdicts = [main]
    language = validate_tenant_prompt(body.language_preference, max_chars=64)
    issues += _issues("language_preference", language)
    verdicts.append(language)
    tone: dict[str, str] = {}
    for key, value in body.tone_profile.items():
        key_verdict = validate_tenant_prompt(key, max_chars=64)
        value_verdict = validate_tenant_prompt(value, max_chars=500)
        issues += _issues(f"tone_profile.{key} (key)", key_verdict) + _issues(f"tone_profile.{key}", value_verdict)
        verdicts += [key_verdict, value_verdict]
        tone[key_verdict.sanitized_prompt] = value_verdict.sanitized_prompt
    prompt = TenantPrompt(custom_system_prompt=main.sanitized_prompt, override_mode=body.override_mode,
                          language_preference=language.sanitized_prompt or "auto", tone_profile=tone)
    if not issues:
        combined = validate_tenant_prompt(tenant_text(prompt))
        issues += _issues("combined", combined)
        verdicts.append(combined)
    if any(v.status == ValidationStatus.REJECTED for v in verdicts):
        status = ValidationStatus.REJECTED
    elif any(v.status == ValidationStatus.SANITIZED for v in verdicts):
        status = ValidationStatus.SANITIZED
    else:
        status = ValidationStatus.VALID
    verdict = ValidationResult(status, main.sanitized_prompt,
                               tuple(ValidationIssue(i.category, i.message, i.start, i.end, i.field) for i in issues))
    return prompt, verdict, issues


def _rejected(issues: list[Issue], detail: str = "the prompt was rejected; nothing was stored") -> JSONResponse:
    body = RejectedOut(detail=detail, issues=issues)
    return JSONResponse(body.model_dump(), status_code=400)


def effective_prompt(assembler: PromptAssembler, config: Config, tenant: str, prompt: TenantPrompt | None) -> str:
    """The first system block a card of `tenant` gets with the default profile and no stage:
    assembled by the prompt core itself, so it is exactly what the layering produces."""
    card = Card(id="effective-prompt", tenant=tenant, board="api", title="Effective system prompt")
    try:
        assembled = assembler.assemble(
            AssemblyRequest(card=card, stage=None, tenant_prompt=prompt), config.assembly_settings(None))
    except AssemblyError as exc:
        raise HTTPException(500, f"configuration problem: {exc}") from None
    return assembled.conversation.system[0].text


def _out(svc: Services, version: TenantPromptVersion) -> PromptOut:
    return PromptOut(**PromptVersionOut.of(version).model_dump(),
                     effective_prompt=effective_prompt(svc.runtime.assembler, svc.config, version.tenant,
                                                       version.prompt))


def _actor(request: Request, svc: Services, tenant: str) -> str:
    """Who made a change, for the version history: the token's id (never the token)."""
    token = bearer_token(request)
    token_id = svc.store.for_tenant(tenant).api_token_id(tenant, token) if token else None
    return f"token:{token_id}" if token_id else f"tenant:{tenant}"


# --------------------------------------------------------------------------- prompt routes


@router.put("/{tenant_id}/prompt", response_model=PromptOut, summary="Set the tenant's custom system prompt",
            responses={400: {"model": RejectedOut, "description": "REJECTED by validation; nothing stored"},
                       **_NOT_FOUND})
def put_prompt(body: PromptIn, tenant: TenantDep, request: Request, svc: SvcDep) -> Any:
    prompt, verdict, issues = check_prompt(body)
    if verdict.status == ValidationStatus.REJECTED:
        return _rejected(issues)
    guarded = guard_check(svc, tenant, tenant_text(prompt))
    if guarded is not None and not guarded[0].allowed:
        text = tenant_text(prompt)
        return _rejected([Issue(field="combined", category="guard_model",
                                message=f"the guard model rejected the prompt: {guarded[0].reason}",
                                start=0, end=len(text))])
    store = svc.store.for_tenant(tenant)
    stored = store.put_tenant_prompt(tenant, prompt, verdict, _actor(request, svc, tenant),
                                     guarded[1] if guarded else None)
    return _out(svc, stored)


@router.get("/{tenant_id}/prompt", response_model=PromptOut, summary="The tenant's current prompt",
            responses=_NOT_FOUND)
def get_prompt(tenant: TenantDep, svc: SvcDep) -> PromptOut:
    current = svc.store.for_tenant(tenant).current_tenant_prompt(tenant)
    if current is None:
        raise HTTPException(404, "the tenant has no prompt")
    return _out(svc, current)


@router.delete("/{tenant_id}/prompt", status_code=204, response_class=Response,
               summary="Remove the tenant's prompt (its versions stay)", responses=_NOT_FOUND)
def delete_prompt(tenant: TenantDep, request: Request, svc: SvcDep) -> Response:
    if not svc.store.for_tenant(tenant).delete_tenant_prompt(tenant, _actor(request, svc, tenant)):
        raise HTTPException(404, "the tenant has no prompt")
    return Response(status_code=204)


@router.get("/{tenant_id}/prompt/versions", response_model=VersionsOut, summary="Every version, oldest first",
            responses=_NOT_FOUND)
def list_versions(tenant: TenantDep, svc: SvcDep) -> VersionsOut:
    store = svc.store.for_tenant(tenant)
    versions = store.tenant_prompt_versions(tenant)
    current = store.current_tenant_prompt(tenant)
    return VersionsOut(tenant=tenant, current_version=current.version if current else None,
                       versions=[PromptVersionOut.of(v) for v in versions])


@router.get("/{tenant_id}/prompt/versions/{version}", response_model=PromptVersionOut, summary="One version",
            responses=_NOT_FOUND)
def get_version(tenant: TenantDep, svc: SvcDep,
                version: Annotated[int, Path(ge=1, le=MAX_PROMPT_VERSION)]) -> PromptVersionOut:
    found = svc.store.for_tenant(tenant).tenant_prompt_version(tenant, version)
    if found is None:
        raise HTTPException(404, f"the tenant has no prompt version {version}")
    return PromptVersionOut.of(found)


@router.post("/{tenant_id}/prompt/rollback", response_model=PromptOut,
             summary="Make a copy of an older version the current one",
             responses={400: {"model": RejectedOut, "description": "The version fails today's validation"},
                        409: {"description": "The version records a deletion"}, **_NOT_FOUND})
def rollback(body: RollbackIn, tenant: TenantDep, request: Request, svc: SvcDep) -> Any:
    store = svc.store.for_tenant(tenant)
    source = store.tenant_prompt_version(tenant, body.version)
    if source is None:
        raise HTTPException(404, f"the tenant has no prompt version {body.version}")
    if source.deleted:
        raise HTTPException(409, f"version {body.version} records a deletion; it holds no prompt")
    # Rules may have tightened since the version was stored: it must pass today's validation.
    _, verdict, issues = check_prompt(PromptIn(
        custom_system_prompt=source.custom_system_prompt, override_mode=source.override_mode,
        language_preference=source.language_preference, tone_profile=source.tone_profile))
    if verdict.status == ValidationStatus.REJECTED:
        return _rejected(issues, f"version {body.version} fails validation now; nothing was stored")
    try:
        restored = store.rollback_tenant_prompt(tenant, body.version, _actor(request, svc, tenant))
    except NotFoundError:
        raise HTTPException(404, f"the tenant has no prompt version {body.version}") from None
    except StoreError as exc:
        raise HTTPException(409, str(exc)) from None
    return _out(svc, restored)


# --------------------------------------------------------------------------- tokens (admin)

AdminDep = Depends(require_admin_path)


def _token_tenant(tenant_id: str) -> str:
    # A token is only issued for a name cards can carry (prompts.card.Card.tenant).
    return card_tenant(tenant_id)


@router.post("/{tenant_id}/tokens", status_code=201, response_model=IssuedTokenOut, dependencies=[AdminDep],
             summary="Issue a bearer token for the tenant (admin token)",
             responses={401: {"description": "The admin token is required"},
                        503: {"description": "Admin operations are disabled"}})
def create_token(tenant_id: str, body: TokenIn, svc: SvcDep) -> IssuedTokenOut:
    tenant = _token_tenant(tenant_id)
    issued = svc.store.for_tenant(tenant).create_api_token(tenant, body.name)
    info = issued.info
    return IssuedTokenOut(id=info.id, tenant=info.tenant, name=info.name, created_at=info.created_at,
                          token=issued.token)


@router.get("/{tenant_id}/tokens", response_model=list[TokenOut], dependencies=[AdminDep],
            summary="The tenant's tokens, revoked ones included (admin token)")
def list_tokens(tenant_id: str, svc: SvcDep) -> list[TokenOut]:
    tenant = _token_tenant(tenant_id)
    return [TokenOut(**t.model_dump()) for t in svc.store.for_tenant(tenant).api_tokens(tenant)]


@router.delete("/{tenant_id}/tokens/{token_id}", status_code=204, response_class=Response,
               dependencies=[AdminDep], summary="Revoke a token at once (admin token)",
               responses={404: {"description": "The tenant has no such token"}})
def revoke_token(tenant_id: str, token_id: str, svc: SvcDep) -> Response:
    tenant = _token_tenant(tenant_id)
    if not svc.store.for_tenant(tenant).revoke_api_token(tenant, token_id):
        raise HTTPException(404, "the tenant has no such token")
    return Response(status_code=204)


# --------------------------------------------------------------------------- limits

def limits_report(config: Config, store: Store, tenant: str, now: datetime) -> dict[str, Any]:
    """The tenant's spend limits (config) and what it used in each window (the ledger): the
    answer of GET /tenants/{t}/limits and of `cardloop tenant show`. None: no limit. The
    tokens and cost include what running calls reserve, as the caps count them; the
    `reserved_*` fields say how much of them that is."""
    effective = limits_for(config, tenant)
    whole, tokens = store.for_tenant(tenant).limit_usage(tenant, now)
    w = windows(now)
    return {"tenant": tenant, "limits": effective.tenant.as_dict(), "per_token_limits": effective.token.as_dict(),
            "usage": whole.as_dict(), "tokens": {token_id: u.as_dict() for token_id, u in tokens.items()},
            "day_resets_at": w.day_end.isoformat(), "month_resets_at": w.month_end.isoformat()}


def _tenant_or_admin(tenant_id: str, request: Request, svc: SvcDep) -> str:
    """The tenant's own token, or the operator's admin token (any tenant)."""
    expected = svc.config.secret(ADMIN_TOKEN_ENV)
    token = bearer_token(request)
    if expected is not None and token is not None and hmac.compare_digest(
            hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest(),
            hashlib.sha256(expected.reveal().encode("utf-8", "surrogatepass")).digest()):
        return _token_tenant(tenant_id)
    return require_tenant_path(tenant_id, require_tenant(request, svc))


@router.get("/{tenant_id}/limits", summary="The tenant's spend limits and its usage in each window "
                                           "(the tenant's token or the admin token)",
            responses={401: {"description": "A valid bearer token is required"}})
def get_limits(tenant: Annotated[str, Depends(_tenant_or_admin)], svc: SvcDep) -> dict[str, Any]:
    return limits_report(svc.config, svc.store, tenant, datetime.fromtimestamp(svc.clock(), UTC))
