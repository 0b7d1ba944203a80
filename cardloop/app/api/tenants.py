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
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator

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
from cardloop.app.tenant_prompts import (
    Issue,
    PromptIn,
    StrictBody,
    check_prompt,
    effective_prompt,
    limits_report,
)
from cardloop.prompts.assemble import AssemblyError
from cardloop.prompts.layers import tenant_text
from cardloop.prompts.validate import ValidationStatus
from cardloop.store import MAX_PROMPT_VERSION, NotFoundError, StoreError, TenantPromptVersion

router = APIRouter(prefix="/tenants", tags=["tenants"])

SvcDep = Annotated[Services, Depends(services)]
TenantDep = Annotated[str, Depends(require_tenant_path)]


# --------------------------------------------------------------------------- models



class RollbackIn(StrictBody):
    version: int = Field(ge=1, le=MAX_PROMPT_VERSION, description="The version to copy into a new current version.")


class TokenIn(StrictBody):
    name: str = Field(min_length=1, max_length=200, description="What the token is for, e.g. 'ci'.")

    @field_validator("name")
    @classmethod
    def _no_controls(cls, value: str) -> str:
        # Shown as is in token lists and `cardloop tenant show`; a NUL cannot be stored on PostgreSQL.
        if any(unicodedata.category(ch) == "Cc" for ch in value):
            raise ValueError("the name must have no control characters (NUL, tab, newline...)")
        return value



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



def _rejected(issues: list[Issue], detail: str = "the prompt was rejected; nothing was stored") -> JSONResponse:
    body = RejectedOut(detail=detail, issues=issues)
    return JSONResponse(body.model_dump(), status_code=400)



def _out(svc: Services, version: TenantPromptVersion) -> PromptOut:
    return PromptOut(**PromptVersionOut.of(version).model_dump(),
                     effective_prompt=_effective(svc, version))


def _effective(svc: Services, version: TenantPromptVersion) -> str:
    try:
        return effective_prompt(svc.runtime.assembler, svc.config, version.tenant, version.prompt)
    except AssemblyError as exc:
        raise HTTPException(500, f"configuration problem: {exc}") from None


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
