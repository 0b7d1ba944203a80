"""Bearer API tokens bound to one tenant, and the operator's admin token.

A tenant token only ever reaches its own tenant: a path naming another tenant answers 404,
as if it did not exist, so ids cannot be probed. Tenant tokens are issued by the admin routes
(cardloop/api/tenants.py) and looked up by their SHA-256 (`Store.tenant_for_token`); the admin
token is the CARDLOOP_ADMIN_TOKEN environment variable (admin routes answer 503 without it)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from cardloop.app.api.services import Services, services
from cardloop.prompts.tenant_id import TENANT_RULE, is_tenant_id

SvcDep = Annotated[Services, Depends(services)]

ADMIN_TOKEN_ENV = "CARDLOOP_ADMIN_TOKEN"


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require_tenant(request: Request, svc: Annotated[Services, Depends(services)]) -> str:
    """The tenant of the request's bearer token; 401 without a valid one."""
    token = bearer_token(request)
    tenant = svc.store.tenant_for_token(token) if token else None
    if tenant is None:
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    return tenant


def card_tenant(tenant_id: str) -> str:
    """`tenant_id` when a card could carry it as its tenant, else 400 naming it: a prompt stored
    for any other id could never be used (the effective prompt builds a card for the tenant)."""
    if not is_tenant_id(tenant_id):
        raise HTTPException(400, f"tenant_id: {TENANT_RULE}")
    return tenant_id


def require_tenant_path(tenant_id: str, tenant: Annotated[str, Depends(require_tenant)]) -> str:
    """For /tenants/{tenant_id}/...: the token's tenant must be the path's, else 404 (another
    tenant's id, well-formed or not, learns nothing). A token of the path's own tenant that no
    card could carry (issued before tokens were checked) is 400, before anything is stored."""
    if tenant_id != tenant:
        raise HTTPException(404, "not found")
    return card_tenant(tenant)


def require_admin(request: Request, svc: Annotated[Services, Depends(services)]) -> None:
    expected = svc.config.secret(ADMIN_TOKEN_ENV)
    if expected is None:
        raise HTTPException(503, f"admin operations are disabled: set {ADMIN_TOKEN_ENV}")
    token = bearer_token(request) or ""
    # Digests of equal length: compare_digest leaks only the length of its inputs, and this
    # makes that the digest's length, not the admin token's.
    if not hmac.compare_digest(_digest(token), _digest(expected.reveal())):
        raise HTTPException(401, "the admin token is required", headers={"WWW-Authenticate": "Bearer"})


def require_admin_path(tenant_id: str, request: Request, svc: Annotated[Services, Depends(services)]) -> None:
    """For admin routes under /tenants/{tenant_id}/...: the admin token is required, and a tenant
    token of *another* tenant gets 404, as on every tenant route, so it learns nothing about the id."""
    expected = svc.config.secret(ADMIN_TOKEN_ENV)
    token = bearer_token(request)
    is_admin = expected is not None and token is not None and hmac.compare_digest(
        _digest(token), _digest(expected.reveal()))
    if token is not None and not is_admin:
        tenant = svc.store.tenant_for_token(token)
        if tenant is not None and tenant != tenant_id:
            raise HTTPException(404, "not found")
    require_admin(request, svc)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
