"""GET /cards/{board}/{card}/prompt: the explain of a tenant's own card, never another's."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.prompts.card import Card
from tests.conftest import EXAMPLE_CARD


def test_a_tenant_sees_its_cards_prompt_and_never_another_tenants(store_factory) -> None:
    store = store_factory()
    config = load_config(REPO_CONFIG, env={})
    sample = Card.model_validate_json(EXAMPLE_CARD.read_text())
    store.upsert_card("globex/github/G-1", sample.model_copy(update={"tenant": "globex", "board": "github",
                                                                     "id": "G-1", "history": (), "context": ()}))
    acme = store.create_api_token("acme", "t").token
    globex = store.create_api_token("globex", "t").token
    app = create_app(Services(config=config, store=store, runtime=ActivityDeps.build(config, store), cards=None,
                              http=httpx.AsyncClient()))
    try:
        with TestClient(app) as client:
            own = client.get("/cards/github/G-1/prompt", params={"stage": "review"},
                             headers={"authorization": f"Bearer {globex}"})
            assert own.status_code == 200, own.text
            data = own.json()
            assert data["card"] == "globex/github/G-1" and data["stage"] == "review"
            assert {r["section"] for r in data["rows"]} >= {"system", "agent", "context", "turn"}
            assert data["tokens"]["total"] <= data["budget"]["total"]
            other = client.get("/cards/github/G-1/prompt", params={"stage": "review"},
                               headers={"authorization": f"Bearer {acme}"})
            assert other.status_code == 404
            assert client.get("/cards/github/G-1/prompt", params={"stage": "review"}).status_code == 401
            bad = client.get("/cards/github/G-1/prompt", params={"stage": "deploy"},
                             headers={"authorization": f"Bearer {globex}"})
            assert bad.status_code == 400 and "unknown stage" in bad.text
    finally:
        store.close()
