"""What the store tests share: two tenants' card keys, a card for a key,
a realistic PostgreSQL deployment (owner + application role) and a connection scoped to a tenant."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Connection, Engine, text

from cardloop.prompts.card import Card
from tests.postgres import deployment, schema_url

A_KEY = "acme/github/PAY-1"
B_KEY = "globex/github/OPS-7"


def card(key: str) -> Card:
    tenant, board, card_id = key.split("/")
    return Card(id=card_id, tenant=tenant, board=board, title=f"card {card_id}", body="body of " + key)


@dataclass
class Cluster:
    schema: str
    owner: str
    app: str
    owner_url: str
    app_url: str
    admin: Engine


@pytest.fixture
def cluster(postgres_admin: Engine) -> Iterator[Cluster]:
    """A realistic deployment: an owner role (not a superuser) that migrates, and the
    application role it provisions."""
    with deployment(postgres_admin, "rls") as (schema, owner, app):
        yield Cluster(schema, owner, app, schema_url(schema, owner), schema_url(schema, app), postgres_admin)


def scoped(conn: Connection, tenant: str) -> None:
    conn.execute(text("SELECT set_config('cardloop.tenant', :t, true)"), {"t": tenant})
