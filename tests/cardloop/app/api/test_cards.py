"""GET /cards/{board}/{card}/prompt: the explain of a tenant's own card, never another's."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.prompts.card import Card
from tests.conftest import EXAMPLE_CARD
from tests.stack import Stack, small_card


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


@pytest.mark.stack_env(CARDLOOP_RETRY__OVERLOAD_DEADLINE="0")
async def test_a_tenant_retries_its_failed_card_and_only_its_own(stack: Stack) -> None:
    acme = stack.store.create_api_token("acme", "t").token
    globex = stack.store.create_api_token("globex", "t").token
    stack.model.inject(status=529)  # the first model call gives up at once: the stage fails as transient
    ref = stack.cards.import_card(small_card("API-RETRY-1"))
    async with httpx.AsyncClient() as out_http:
        svc = Services(config=stack.config, store=stack.store, runtime=stack.runtime, cards=stack.cards,
                       http=out_http)
        transport = httpx.ASGITransport(app=create_app(svc))
        async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as api:
            url = "/cards/github/API-RETRY-1/retry"
            assert (await api.post(url)).status_code == 401
            assert (await api.post(url, headers={"authorization": f"Bearer {globex}"})).status_code == 404
            early = await api.post(url, headers={"authorization": f"Bearer {acme}"})
            assert early.status_code == 409 and "nothing to retry" in early.json()["detail"]
            await stack.cards.move(ref, "testing", delivery_id="t")
            state = await stack.wait_state(ref, lambda s: bool(s.history))
            assert state.history[0].outcome == "failed" and state.history[0].transient
            r = await api.post(url, headers={"authorization": f"Bearer {acme}"})
            assert r.status_code == 200, r.text
            assert r.json() == {"card": "acme/github/API-RETRY-1", "stage": "testing", "status": "retrying"}
            state = await stack.wait_state(ref, lambda s: s.status == "done")
            assert [r.outcome for r in state.history] == ["failed", "completed"]


async def test_a_tenant_cancels_its_cards_running_stage_and_only_its_own(stack: Stack) -> None:
    acme = stack.store.create_api_token("acme", "t").token
    globex = stack.store.create_api_token("globex", "t").token
    stack.model.inject(delay=10.0)  # planning waits for the model while it is cancelled
    ref = stack.cards.import_card(small_card("API-CANCEL-1"))
    async with httpx.AsyncClient() as out_http:
        svc = Services(config=stack.config, store=stack.store, runtime=stack.runtime, cards=stack.cards,
                       http=out_http)
        transport = httpx.ASGITransport(app=create_app(svc))
        async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as api:
            url = "/cards/github/API-CANCEL-1/cancel"
            assert (await api.post(url)).status_code == 401
            assert (await api.post(url, headers={"authorization": f"Bearer {globex}"})).status_code == 404
            early = await api.post(url, headers={"authorization": f"Bearer {acme}"})
            assert early.status_code == 409 and "nothing to cancel" in early.json()["detail"]
            await stack.cards.move(ref, "planning", delivery_id="p")
            await stack.wait_state(ref, lambda s: s.status == "running")
            r = await api.post(url, headers={"authorization": f"Bearer {acme}"})
            assert r.status_code == 200, r.text
            run = r.json()["run"]
            assert r.json()["card"] == ref.key and (run["stage"], run["run"], run["outcome"]) == \
                ("planning", 1, "cancelled")
            assert run["reason"].startswith("cancelled by api:acme")
            state = await stack.cards.state(ref)
            assert state is not None and state.status == "idle"
            again = await api.post(url, headers={"authorization": f"Bearer {acme}"})
            assert again.status_code == 409 and "no stage runs" in again.json()["detail"]


def test_a_card_id_no_card_can_have_is_404_on_every_card_route(store_factory) -> None:
    # A 5,000-character id (a script gone wrong) made GET .../prompt a 500: the store refused the
    # key it was asked to look up. No such card can exist, so it is the 404 of any unknown card.
    store = store_factory()
    config = load_config(REPO_CONFIG, env={})
    token = store.create_api_token("acme", "t").token
    app = create_app(Services(config=config, store=store, runtime=ActivityDeps.build(config, store), cards=None,
                              http=httpx.AsyncClient()))
    auth = {"authorization": f"Bearer {token}"}
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            for card in ("github/" + "a" * 5000, "g" * 300 + "/X-1", "github/-x"):
                prompt = client.get(f"/cards/{card}/prompt", params={"stage": "review"}, headers=auth)
                assert prompt.status_code == 404, (card[:20], prompt.text)
                for action in ("retry", "cancel"):
                    assert client.post(f"/cards/{card}/{action}", headers=auth).status_code == 404
    finally:
        store.close()
