"""API tokens: bearer tokens bound to one tenant, kept as SHA-256 digests only."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import bindparam, select, text, update

from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.values import ApiToken, IssuedApiToken, check_tenant

TOKEN_PREFIX = "cl_"  # lets people and secret scanners recognize a cardloop token
# last_used_at is written at most this often per token: authentication stays a read.
TOKEN_USE_RESOLUTION = timedelta(minutes=1)


class ApiTokensMixin(StoreBase):
    def create_api_token(self, tenant: str, name: str) -> IssuedApiToken:
        """A new bearer token for `tenant`. Its plaintext is in the result and nowhere else: the
        database keeps its SHA-256. It starts with "cl_" so people and secret scanners spot it."""
        self._tenant(check_tenant(tenant))
        check_text("name", name, 200, required=True)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        info = ApiToken(id="tok_" + secrets.token_hex(8), tenant=tenant, name=name, created_at=self.clock())
        with self._db.write(tenant) as conn:
            conn.execute(
                s.api_tokens.insert().values(
                    id=info.id, tenant=tenant, name=name, token_sha256=_token_digest(token), created_at=info.created_at
                )
            )
        return IssuedApiToken(info=info, token=token)

    def revoke_api_token(self, tenant: str, token_id: str) -> bool:
        """Revoke one of the tenant's tokens at once; False when the tenant has no such token.
        Revoking again is a no-op that answers True (the first revocation time is kept)."""
        self._tenant(check_tenant(tenant))
        t = s.api_tokens.c
        with self._db.write(tenant) as conn:
            conn.execute(
                update(s.api_tokens)
                .where(t.id == token_id, t.tenant == tenant, t.revoked_at.is_(None))
                .values(revoked_at=self.clock())
            )
            found = conn.execute(select(t.id).where(t.id == token_id, t.tenant == tenant)).first()
        return found is not None

    def api_tokens(self, tenant: str) -> list[ApiToken]:
        """The tenant's tokens, revoked ones included, oldest first (never a hash or a token)."""
        self._tenant(check_tenant(tenant))
        t = s.api_tokens.c
        with self._db.read(tenant) as conn:
            rows = conn.execute(
                select(t.id, t.tenant, t.name, t.created_at, t.revoked_at, t.last_used_at)
                .where(t.tenant == tenant)
                .order_by(t.created_at, t.id)
            ).all()
        return [ApiToken.model_validate(dict(row._mapping)) for row in rows]

    def api_token_id(self, tenant: str, token: str) -> str | None:
        """The id of the tenant's token `token` (revoked or not), for audit trails."""
        self._tenant(check_tenant(tenant))
        t = s.api_tokens.c
        with self._db.read(tenant) as conn:
            return conn.execute(
                select(t.id).where(t.token_sha256 == _token_digest(token), t.tenant == tenant)
            ).scalar_one_or_none()

    def tenant_for_token(self, token: str) -> str | None:
        """The tenant of a valid (not revoked) token, else None. Looked up by SHA-256: the
        plaintext is never compared, so timing says nothing about it. `last_used_at` is written
        at most once a minute per token.

        On PostgreSQL the tenant is not known yet, so row-level security would hide the row:
        the lookup is `cardloop_token_tenant(hash, now)`, a SECURITY DEFINER function that
        answers for exactly one hash (schema.py).
        """
        if not isinstance(token, str) or not token or len(token) > 512:
            return None
        digest = _token_digest(token)
        now = self.clock()
        if self._db.dialect == "postgresql":
            call = text("SELECT cardloop_token_tenant(CAST(:digest AS text), CAST(:at AS timestamptz))")
            call = call.bindparams(bindparam("at", type_=s.UTCDateTime()))
            with self._db.write() as conn:
                tenant = conn.execute(call, {"digest": digest, "at": now}).scalar_one_or_none()
        else:
            t = s.api_tokens.c
            with self._db.read() as conn:
                row = conn.execute(
                    select(t.id, t.tenant, t.last_used_at).where(t.token_sha256 == digest, t.revoked_at.is_(None))
                ).one_or_none()
            if row is None:
                return None
            tenant = row.tenant
            stale = now - TOKEN_USE_RESOLUTION
            if row.last_used_at is None or row.last_used_at <= stale:
                with self._db.write(tenant) as conn:
                    conn.execute(
                        update(s.api_tokens)
                        .where(t.id == row.id, (t.last_used_at.is_(None)) | (t.last_used_at <= stale))
                        .values(last_used_at=now)
                    )
        if tenant is None or (self._scope is not None and tenant != self._scope):
            return None
        return str(tenant)


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
