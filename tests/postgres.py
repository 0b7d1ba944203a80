"""The machine's PostgreSQL for the tests that are about it (fixtures in tests/conftest.py):
where it is, a schema-scoped URL, and dropping the roles a test created."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def schema_url(schema: str, user: str | None = None) -> str:
    """PG_URL with `schema` first on the search path, as `user` (no password: trust auth) if given.
    Its sessions commit without waiting for the WAL flush (a test database outlives no crash):
    opening a store runs 13 migrations, each its own commit."""
    url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema} -csynchronous_commit=off"})
    if user is not None:
        url = url.set(username=user, password=None)
    return url.render_as_string(hide_password=False)


@contextmanager
def fresh_schema(admin: Engine, prefix: str = "t") -> Iterator[str]:
    """A new schema's store URL (PG_URL with it on the search path); the schema is dropped after."""
    schema = f"{prefix}_{secrets.token_hex(6)}"
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield schema_url(schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")


def drop_roles(admin: Engine, *roles: str) -> None:
    for role in roles:
        with admin.begin() as conn:
            exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first()
            if exists:
                # DROP OWNED revokes what the role was granted in this database; then it can go.
                conn.exec_driver_sql(f'DROP OWNED BY "{role}" CASCADE')
                conn.exec_driver_sql(f'DROP ROLE "{role}"')


@contextmanager
def deployment(admin: Engine, tag: str) -> Iterator[tuple[str, str, str]]:
    """A realistic deployment's names (schema, owner role, application role), unique because
    roles are shared by the whole cluster: the owner (not a superuser, CREATEROLE) and its
    schema exist; the application role is the owner's to provision. All dropped afterwards."""
    suffix = secrets.token_hex(4)
    schema, owner, app = f"t_{tag}_{suffix}", f"cl_owner_{suffix}", f"cl_app_{suffix}"
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {owner} LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema} AUTHORIZATION {owner}")
    try:
        yield schema, owner, app
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        drop_roles(admin, app, owner)
