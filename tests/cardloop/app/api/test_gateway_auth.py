"""The prompt gateway's tenant token, in each caller's protocol (issue 12 item 10): where the token
goes, a 401 in the OpenAI or Anthropic error shape, a server without its model key, and /docs
served without a CDN."""

from __future__ import annotations

import re
from pathlib import Path

import anthropic
import httpx
from fastapi.testclient import TestClient

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.scripted_model import ScriptedModel
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.store import Store
from tests.cardloop.app.api.gateway_kit import (
    ANTHROPIC,
    OPENAI,
    Gateway,
    assert_anthropic_error,
    assert_openai_error,
    build_app,
    close_app,
    reply,
)

OPENAI_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_BODY = {**OPENAI_BODY, "max_tokens": 20}


def test_a_missing_or_wrong_token_is_401_in_each_callers_shape(tenant_gw: Gateway) -> None:
    raw = TestClient(tenant_gw.app)  # no default bearer header
    for headers, said in (({}, "no API token was sent"), ({"authorization": "Bearer nope"}, "not valid")):
        error = assert_openai_error(raw.post(OPENAI, json=OPENAI_BODY, headers=headers), 401)
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_api_key"
        assert said in error["message"] and "Authorization: Bearer" in error["message"]
        r = raw.post(ANTHROPIC, json=ANTHROPIC_BODY, headers=headers)
        error = assert_anthropic_error(r, 401)
        assert error["type"] == "authentication_error" and said in error["message"]
        assert "x-api-key" in error["message"] and r.headers["www-authenticate"] == "Bearer"
    # x-api-key is Anthropic's header: the OpenAI route takes only Authorization.
    r = raw.post(OPENAI, json=OPENAI_BODY, headers={"x-api-key": "tok-acme"})
    assert "no API token was sent" in assert_openai_error(r, 401)["message"]
    assert tenant_gw.model.request_count == 0


def test_the_anthropic_route_takes_x_api_key_and_bearer(tenant_gw: Gateway) -> None:
    raw = TestClient(tenant_gw.app)
    for headers in ({"x-api-key": "tok-acme"}, {"authorization": "Bearer tok-acme"}):
        reply(tenant_gw.model, "hello")
        r = raw.post(ANTHROPIC, json=ANTHROPIC_BODY, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["content"][0]["text"] == "hello"
    reply(tenant_gw.model, "hello")
    assert raw.post(OPENAI, json=OPENAI_BODY, headers={"authorization": "Bearer tok-acme"}).status_code == 200
    assert tenant_gw.store.usage_totals("acme/gateway/-").total.calls == 3


def test_the_anthropic_sdk_with_its_api_key_reaches_the_gateway(tenant_gw: Gateway) -> None:
    # TestClient is an httpx.Client over the app: the SDK's own requests, headers as it sends them.
    client = anthropic.Anthropic(api_key="tok-acme", base_url="http://testserver", max_retries=0,
                                 http_client=TestClient(tenant_gw.app))
    reply(tenant_gw.model, "sdk answer")
    message = client.messages.create(model="any", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "sdk answer"
    bad = anthropic.Anthropic(api_key="wrong", base_url="http://testserver", max_retries=0,
                              http_client=TestClient(tenant_gw.app))
    try:
        bad.messages.create(model="any", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("a wrong key was accepted")
    except anthropic.AuthenticationError as err:
        assert "not valid" in str(err)


def test_a_server_without_its_model_key_says_so_and_calls_nothing(tmp_path: Path, model: ScriptedModel) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    app = build_app(tmp_path, store=store, env={"ANTHROPIC_API_KEY": ""}, base_urls={"claude": model.url})
    try:
        with TestClient(app) as client:
            error = assert_openai_error(client.post(OPENAI, json=OPENAI_BODY), 503)
            assert error["code"] == "no_provider_key" and error["type"] == "server_error"
            for text in (error["message"], assert_anthropic_error(client.post(ANTHROPIC, json=ANTHROPIC_BODY),
                                                                  503)["message"]):
                assert "no API key for the gateway's model profile 'claude'" in text
                assert "no call was made" in text and "refused" not in text
            r = client.post(ANTHROPIC, json=ANTHROPIC_BODY)
            assert r.json()["error"]["type"] == "api_error" and "retry-after" not in r.headers
        assert model.request_count == 0
    finally:
        close_app(app)


def test_docs_load_their_assets_from_this_server(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'api.sqlite'}")
    config = load_config(REPO_CONFIG, env={})
    app = create_app(Services(config=config, store=store, runtime=ActivityDeps.build(config, store), cards=None,
                              http=httpx.AsyncClient()))
    try:
        with TestClient(app) as client:
            for page in ("/docs", "/redoc"):
                html = client.get(page)
                assert html.status_code == 200 and "/openapi.json" in html.text
                urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: *['"]([^'"]+)['"]""", html.text)
                urls = [u for pair in urls for u in pair if u]
                assert urls and not [u for u in urls if "://" in u or u.startswith("//")], urls
                for url in urls:
                    if url != "/openapi.json":
                        assert client.get(url).status_code == 200, url
            js = client.get("/docs-assets/swagger-ui-bundle.js")
            assert "SwaggerUIBundle" in js.text
            assert client.get("/openapi.json").json()["paths"]["/v1/messages"]
    finally:
        store.close()
