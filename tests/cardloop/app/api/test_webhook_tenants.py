"""Webhook secrets per tenant, through the real app and Temporal: the secret that verifies a
delivery decides its tenant; a body that names another tenant is 403 and touches nothing; the
board's own variable keeps serving the default tenant."""

from __future__ import annotations

import json

import pytest

from cardloop.contracts.payloads import CardRef
from tests.cardloop.app.boards.conftest import fixture_json
from tests.stack import Stack

from .webhook_kit import ENV, SECRET, Clock, hub_signature, linear_signature, webhook_client

pytestmark = pytest.mark.timeout(240)
ACME, GLOBEX = "acme-generic-secret-0123", "globex-generic-secret-4567"
TENANT_ENV = {**ENV, "CARDLOOP_BOARDS__GENERIC__SECRETS": '{ acme = "ACME_GENERIC_SECRET", globex = "GLOBEX_SECRET" }',
              "ACME_GENERIC_SECRET": ACME, "GLOBEX_SECRET": GLOBEX,
              "CARDLOOP_BOARDS__GENERIC__TENANTS": '{ ops = "globex" }',
              "CARDLOOP_BOARDS__LINEAR__TENANTS": '{ "e2a5c8f1-3b6d-4a9e-8c7f-1d0b2a3e4f56" = "acme" }'}


def move(card: str, **extra: object) -> bytes:
    return json.dumps({"card_id": card, "stage": "testing", "delivery_id": f"{card}-1", "title": card,
                       **extra}).encode()


async def post(api, body: bytes, secret: str):
    return await api.post("/webhooks/generic", content=body, headers={
        "content-type": "application/json", "x-hub-signature-256": hub_signature(body, secret)})


@pytest.mark.stack_env(**TENANT_ENV)
async def test_the_secret_that_verifies_a_delivery_decides_its_tenant(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        r = await post(api, move("T-1"), ACME)
        assert r.status_code == 200, r.text
        assert r.json()["tenant"] == "acme" and r.json()["events"][0]["card"] == "acme/generic/T-1"
        r = await post(api, move("T-2", tenant="ops"), GLOBEX)          # a key mapped to globex
        assert r.status_code == 200 and r.json()["events"][0]["card"] == "globex/generic/T-2", r.text
        r = await post(api, move("T-3", tenant="globex"), GLOBEX)       # the tenant's own name
        assert r.status_code == 200 and r.json()["events"][0]["card"] == "globex/generic/T-3", r.text
        r = await post(api, move("T-4"), SECRET)                        # the board's variable: default
        assert r.status_code == 200 and r.json()["events"][0]["card"] == "default/generic/T-4", r.text
    await stack.cards.wait_for(CardRef(tenant="acme", board="generic", card_id="T-1"),
                               lambda s: s.status == "done", timeout=60)


@pytest.mark.stack_env(**TENANT_ENV)
async def test_a_body_naming_another_tenant_is_403_and_touches_nothing(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        for body, secret, named in [(move("X-1", tenant="globex"), ACME, "globex"),
                                    (move("X-2", tenant="ops"), ACME, "globex"),       # mapped to globex
                                    (move("X-3", tenant="acme"), SECRET, "acme"),      # default's secret
                                    (move("X-4", tenant="nobody"), GLOBEX, "nobody")]:
            r = await post(api, body, secret)
            assert r.status_code == 403, r.text
            detail = r.json()["detail"]
            assert f"names tenant '{named}'" in detail and "signed with the secret of tenant" in detail
        r = await post(api, move("X-5"), "a-secret-no-tenant-has")
        assert r.status_code == 401
    started = [wf.id async for wf in stack.client.list_workflows(f"TaskQueue = '{stack.task_queue}'")]
    assert started == []
    for key in ("globex/generic/X-1", "globex/generic/X-2", "acme/generic/X-3", "acme/generic/X-1"):
        assert stack.store.card_fields(key) is None


@pytest.mark.stack_env(**TENANT_ENV)
async def test_a_board_org_mapped_to_a_tenant_needs_that_tenants_secret(stack: Stack) -> None:
    # Linear's organizationId maps to acme, but only the board's default secret is set for Linear.
    data = fixture_json("linear/issue_update_state.json")
    body = json.dumps(data).encode()
    async with webhook_client(stack, clock=Clock(data["webhookTimestamp"] / 1000)) as api:
        r = await api.post("/webhooks/linear", content=body, headers={
            "linear-signature": linear_signature(body), "linear-delivery": "l-1"})
    assert r.status_code == 403 and "names tenant 'acme'" in r.json()["detail"], r.text
    assert stack.store.card_fields("acme/linear/ENG-123") is None


@pytest.mark.stack_env(**{**TENANT_ENV, "GLOBEX_SECRET": ACME})
async def test_two_tenants_with_one_secret_is_a_configuration_error(stack: Stack) -> None:
    async with webhook_client(stack) as api:
        r = await post(api, move("D-1"), ACME)
    assert r.status_code == 503 and "same secret" in r.json()["detail"], r.text
