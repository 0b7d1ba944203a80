"""The store the HTTP API runs on (SQLite, or PostgreSQL as the application role), and the
prompt gateway's app around the scripted model (gateway_kit.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from cardloop.app.scripted_model import ScriptedModel
from cardloop.prompts.card import TenantPrompt
from cardloop.store import Store
from tests.cardloop.app.api.gateway_kit import API_KEY, TENANT_TEXT, Gateway, TenantStore, build_app, close_app
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


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(api_key=API_KEY) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, model: ScriptedModel) -> Iterator[Gateway]:
    """The override path: the gateway's tenant dependencies answer "acme"; the store has no tenant methods."""
    store = Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    app = build_app(tmp_path, store=store, base_urls={"claude": model.url})
    with TestClient(app) as client:
        yield Gateway(client, app, model, store)
    close_app(app)


@pytest.fixture
def tenant_gw(tmp_path: Path, model: ScriptedModel) -> Iterator[Gateway]:
    """The real token lookup over a store that knows tokens and a tenant prompt."""
    store = TenantStore.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    assert isinstance(store, TenantStore)
    store.tokens = {"tok-acme": "acme"}
    store.prompt = TenantPrompt(custom_system_prompt=TENANT_TEXT)
    app = build_app(tmp_path, store=store, base_urls={"claude": model.url}, override=False)
    with TestClient(app, headers={"authorization": "Bearer tok-acme"}) as client:
        yield Gateway(client, app, model, store)
    close_app(app)
