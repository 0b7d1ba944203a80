"""Bad input the API fuzz test (test_api_fuzz.py) found answered 500 or in the wrong shape, each
named after what happens now: the whole app as `cardloop api` serves it (every router, the body
limit, the real token lookup, the board adapters) on a real SQLite store; what only PostgreSQL
refuses, on PostgreSQL (as the application role) too."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.store import Store
from tests.cardloop.app.api.gateway_kit import ANTHROPIC, OPENAI, assert_anthropic_error, assert_openai_error
from tests.cardloop.app.api.webhook_kit import ENV, hub_signature

LIMIT = 65536  # api.max_body_bytes in webhook_kit.ENV


def _app(tmp_path: Path, store: Store) -> Iterator[TestClient]:
    config = load_config(REPO_CONFIG, env={**ENV, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789",
                                           "CARDLOOP_ADMIN_TOKEN": "admin-bad-input-0123456789",
                                           "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "none")})
    http = httpx.AsyncClient()
    svc = Services(config=config, store=store, runtime=ActivityDeps.build(config, store), cards=None, http=http,
                   adapters=build_adapters(config, http))
    token = store.create_api_token("acme", "bad-input").token
    with TestClient(create_app(svc), headers={"authorization": f"Bearer {token}"}) as client:
        yield client
    asyncio.run(http.aclose())
    store.close()


@pytest.fixture
def app(tmp_path: Path) -> Iterator[TestClient]:
    yield from _app(tmp_path, Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}"))


@pytest.fixture
def app_any_store(tmp_path: Path, store_factory: Callable[[], Store]) -> Iterator[TestClient]:
    """The app on SQLite, and on PostgreSQL as the application role (conftest.store_factory)."""
    yield from _app(tmp_path, store_factory())


def _store(client: TestClient) -> Store:
    return client.app.state.services.store  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the gateway


@pytest.mark.parametrize("role", [[], ["user"], {"a": 1}])
def test_a_gateway_message_whose_role_is_a_list_or_object_is_a_400_naming_it(app: TestClient, role: object) -> None:
    # It was a 500: the role was looked up in a set of roles, and a list or object cannot be hashed.
    r = app.post(OPENAI, json={"model": "m", "messages": [{"role": role, "content": "hi"}]})
    error = assert_openai_error(r, 400)
    assert error["param"] == "messages.0.role" and "must be one of" in error["message"]
    r = app.post(ANTHROPIC, json={"model": "m", "max_tokens": 8, "messages": [{"role": role, "content": "hi"}]})
    assert "messages.0.role: must be 'user' or 'assistant'" in assert_anthropic_error(r, 400)["message"]
    assert _store(app).ledger("acme/gateway/-") == []  # nothing reached the ledger


@pytest.mark.parametrize(("method", "path"), [
    ("GET", OPENAI), ("PUT", OPENAI), ("DELETE", ANTHROPIC), ("GET", "/v1/models"), ("POST", "/v1/completions"),
    ("POST", "/v1/chat/completions/extra"),
])
def test_an_unknown_gateway_path_or_method_answers_in_the_openai_error_shape(app: TestClient, method: str,
                                                                             path: str) -> None:
    # They were FastAPI's {"detail": "Not Found"}: the SDKs read no message from it.
    r = app.request(method, path)
    shape = assert_anthropic_error if path.startswith("/v1/messages") else assert_openai_error
    error = shape(r, r.status_code)
    assert r.status_code in (404, 405) and ("Not Found" in error["message"] or "Method Not Allowed" in error["message"])
    if r.status_code == 405:
        assert r.headers["allow"] == "POST"  # Starlette's header, kept


def test_an_anthropic_client_gets_the_anthropic_shape_on_any_v1_path(app: TestClient) -> None:
    # Claude clients call /v1/messages/count_tokens and /v1/models too; they send anthropic-version.
    for path in ("/v1/messages/count_tokens", "/v1/models"):
        r = app.post(path, headers={"anthropic-version": "2023-06-01"}, json={})
        assert assert_anthropic_error(r, 404)["type"] == "not_found_error"


def test_an_oversize_body_to_an_unknown_gateway_path_is_413_in_the_sdk_shape(app: TestClient) -> None:
    r = app.post("/v1/chat/completions/", content=b"x" * (LIMIT + 1))
    assert assert_openai_error(r, 413)["code"] == "too_large"


# --------------------------------------------------------------------------- webhooks


def test_a_jira_changelog_item_whose_field_is_an_object_is_ignored_not_a_500(app: TestClient) -> None:
    # It was a 500: the changelog's field names were collected in a set, and an object cannot be hashed.
    delivery = {"timestamp": int(time.time() * 1000), "webhookEvent": "jira:issue_updated",
                "issue": {"key": "PAY-1", "fields": {"summary": "Fix it", "project": {"key": "PAY"}}},
                "changelog": {"items": [{"field": {"id": "status"}, "toString": "In Progress"},
                                        {"fieldId": ["summary"]}]}}
    body = json.dumps(delivery).encode()
    r = app.post("/webhooks/jira", content=body, headers={"x-hub-signature": hub_signature(body)})
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ignored",
                        "reason": "Jira issue update did not change its status, summary, description or project"}
    assert _store(app).card_fields("default/jira/PAY-1") is None


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/webhooks/generic", 405), ("PUT", "/webhooks/github", 405), ("POST", "/webhooks/generic/extra", 404),
    ("POST", "/webhooks/generic%2F..", 404), ("POST", "/webhooks", 404),
])
def test_a_wrong_webhook_path_or_method_answers_in_the_webhook_shape(app: TestClient, method: str, path: str,
                                                                     status: int) -> None:
    # They were FastAPI's {"detail": ...}, unlike every other webhook refusal a board logs.
    r = app.request(method, path, content=b"{}")
    assert r.status_code == status, r.text
    assert r.json()["status"] == "refused" and r.json()["detail"]


# --------------------------------------------------------------------------- tenant routes


async def _pieces(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 8192):
        yield body[start:start + 8192]


@pytest.mark.parametrize(("method", "path", "admin"), [
    ("PUT", "/tenants/acme/prompt", False), ("POST", "/tenants/acme/prompt/rollback", False),
    ("POST", "/tenants/acme/tokens", True),
])
async def test_a_streamed_body_over_the_limit_is_413_on_the_tenant_routes_not_a_400(
        app: TestClient, method: str, path: str, admin: bool) -> None:
    # Sent without Content-Length it was 400 "There was an error parsing the body": FastAPI
    # turned the body limit's error into its own 400 while reading the route's model.
    headers = {"content-type": "application/json"}
    if admin:
        headers["authorization"] = "Bearer admin-bad-input-0123456789"
    else:
        headers["authorization"] = app.headers["authorization"]
    body = json.dumps({"custom_system_prompt": "x" * LIMIT}).encode()
    transport = httpx.ASGITransport(app=app.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as client:
        r = await client.request(method, path, content=_pieces(body), headers=headers)
    assert r.status_code == 413, r.text
    assert r.json() == {"detail": f"request body larger than {LIMIT:,} bytes"}
    store = _store(app)
    assert store.tenant_prompt_versions("acme") == [] and len(store.api_tokens("acme")) == 1


def test_a_token_name_with_a_nul_or_other_control_character_is_a_400(app_any_store: TestClient) -> None:
    app = app_any_store
    # On PostgreSQL it was a 500 (its text cannot hold NUL); on SQLite a name a listing showed broken.
    admin = {"authorization": "Bearer admin-bad-input-0123456789"}
    for name in ("ci\x00", "ci\nnext line", "\x1b[31mred"):
        r = app.post("/tenants/acme/tokens", json={"name": name}, headers=admin)
        assert r.status_code == 400, r.text
        assert r.json()["problems"][0]["loc"] == "body.name" and "control characters" in r.json()["problems"][0]["msg"]
    assert [t.name for t in _store(app).api_tokens("acme")] == ["bad-input"]


def test_revoking_a_token_id_with_a_nul_is_a_404(app_any_store: TestClient) -> None:
    app = app_any_store
    # On PostgreSQL it was a 500: the id went into the query as sent.
    r = app.delete("/tenants/acme/tokens/tok_%00", headers={"authorization": "Bearer admin-bad-input-0123456789"})
    assert r.status_code == 404 and r.json() == {"detail": "the tenant has no such token"}


@pytest.mark.parametrize("path", ["/webhooks/generic/", "/webhooks/generic//"])
def test_a_webhook_url_with_a_trailing_slash_reaches_its_route_without_a_redirect(app: TestClient, path: str) -> None:
    # It was a 307 to the path without the slash: GitHub does not follow redirects, so a webhook
    # URL pasted with a slash at its end failed every delivery.
    body = b'{"card_id": "PAY-1", "to_column": "Coding"}'
    for target in (path, "/webhooks/generic"):
        r = app.post(target, content=body, headers={"x-hub-signature-256": "sha256=" + "0" * 64},
                     follow_redirects=False)
        assert r.status_code == 401, (target, r.status_code, r.text)
        assert r.json()["status"] == "refused"
    assert app.get("/livez/", follow_redirects=False).json() == {"status": "ok"}
