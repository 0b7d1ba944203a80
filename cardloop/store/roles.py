"""PostgreSQL roles: provisioning the application's role, whose rows row-level security binds
(Store.provision_postgres_role runs this as the schema owner)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from sqlalchemy import Connection, text
from sqlalchemy.exc import ProgrammingError

from cardloop.store import migrations
from cardloop.store.values import StoreError


def provision(conn: Connection, role: str, password: str | None) -> None:
    quote = conn.dialect.identifier_preparer.quote
    if not isinstance(role, str) or not role or len(role) > 63:
        raise StoreError(f"role {role!r}: expected a PostgreSQL role name of 1 to 63 characters")
    if role == conn.execute(text("SELECT current_user")).scalar_one():
        raise StoreError(f"role {role!r} is the schema owner; the application needs a role of its own")
    found = conn.execute(
        text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :role"), {"role": role}
    ).one_or_none()
    verifier = f" PASSWORD '{scram_sha256_verifier(password)}'" if password is not None else ""
    if found is None:
        try:
            conn.exec_driver_sql(
                f"CREATE ROLE {quote(role)} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE{verifier}"
            )
        except ProgrammingError as exc:
            raise StoreError(
                f"cannot create role {role!r} ({exc.orig}); have a superuser run: CREATE ROLE {quote(role)} "
                "LOGIN PASSWORD '...'; then provision again to grant it"
            ) from None
    else:
        if found.rolsuper or found.rolbypassrls:
            raise StoreError(f"role {role!r} is a superuser or has BYPASSRLS: row-level security would not bind it")
        if verifier:
            try:
                conn.exec_driver_sql(f"ALTER ROLE {quote(role)}{verifier}")
            except ProgrammingError as exc:
                raise StoreError(f"cannot set the password of role {role!r} ({exc.orig}); "
                                 "provision without a password, or as a role with CREATEROLE") from None
    for statement in migrations.provision_role_sql(conn, role):
        conn.exec_driver_sql(statement)


def scram_sha256_verifier(password: str, *, salt: bytes | None = None, iterations: int = 4096) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677), computed here
    so the plaintext never reaches the server or its statement log."""
    if not password or not password.isascii() or not password.isprintable():
        # PostgreSQL SASLpreps non-ASCII passwords first; printable ASCII needs no preparation.
        raise StoreError("the role password must be printable ASCII (generate one, e.g. secrets.token_urlsafe)")
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("ascii"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = base64.b64encode
    return (
        f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}"
        f"${b64(stored_key).decode()}:{b64(server_key).decode()}"
    )
