"""Bearer API tokens bound to one tenant, and the operator's admin token.

A tenant token only ever reaches its own tenant: a path naming another tenant answers 404,
as if it did not exist, so ids cannot be probed."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from cardloop.api.services import Services, services

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


def require_tenant_path(tenant_id: str, tenant: Annotated[str, Depends(require_tenant)]) -> str:
    """For /tenants/{tenant_id}/...: the token's tenant must be the path's, else 404."""
    if tenant_id != tenant:
        raise HTTPException(404, "not found")
    return tenant


def require_admin(request: Request, svc: Annotated[Services, Depends(services)]) -> None:
    expected = svc.config.secret(ADMIN_TOKEN_ENV)
    if expected is None:
        raise HTTPException(503, f"admin operations are disabled: set {ADMIN_TOKEN_ENV}")
    token = bearer_token(request) or ""
    if not hmac.compare_digest(token.encode(), expected.reveal().encode()):
        raise HTTPException(401, "the admin token is required", headers={"WWW-Authenticate": "Bearer"})
