"""The store the HTTP API runs on: SQLite, or PostgreSQL as the application role."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from cardloop.store import Store
from tests.postgres import deployment, schema_url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens the store the app uses: a SQLite file, or PostgreSQL as the application role."""
    if request.param == "sqlite":
        yield lambda: Store.open(f"sqlite:///{tmp_path}/store.sqlite")
        return
    admin: Engine = request.getfixturevalue("postgres_admin")
    with deployment(admin, "api") as (schema, owner, app_role):
        Store.provision_postgres_role(schema_url(schema, owner), app_role)
        yield lambda: Store.open(schema_url(schema, app_role))
