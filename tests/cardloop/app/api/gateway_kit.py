"""What the prompt gateway's tests share: the app around the router (or the whole app) with the
real Anthropic client behind it, uvicorn on loopback, a store with tenant methods, and the
error-shape checks (fixtures model, gw and tenant_gw are in conftest.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api import gateway
from cardloop.app.api.app import create_app
from cardloop.app.api.gateway.routes import anthropic_tenant, openai_tenant
from cardloop.app.api.services import Services
from cardloop.app.scripted_model import ScriptedModel
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.prompts.card import TenantPrompt
from cardloop.store import Store

ROOT = Path(__file__).resolve().parents[4]
GUARDRAILS = (ROOT / "prompts" / "templates" / "guardrails.md").read_text(encoding="utf-8").strip()
API_KEY = "sk-ant-api03-GATEWAY-TEST-KEY-0123456789abcdefghijklmnopqrstuvwxyz"
PROFILE_PROMPT = "You are an expert software engineer working through a team's backlog."
TENANT_TEXT = "Always mention the ACME style guide."
GITHUB_TOKEN = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7d"
OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
OPENAI_KEYS = {"id", "object", "created", "model", "choices", "usage"}
ANTHROPIC_KEYS = {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}


class TenantStore(Store):
    """Store with the two methods other work adds to it (token lookup, current tenant prompt),
    as small fakes with real logic, so the unpatched token lookup and the tenant layer run."""

    tokens: dict[str, str]
    prompt: TenantPrompt | None

    def tenant_for_token(self, token: str) -> str | None:
        return self.tokens.get(token)

    def current_tenant_prompt(self, tenant: str) -> TenantPrompt | None:
        return self.prompt if tenant == "acme" else None


@dataclass
class Gateway:
    client: TestClient
    app: FastAPI
    model: ScriptedModel
    store: Store


def build_app(tmp_path: Path, *, store: Store, env: dict[str, str] | None = None,
              base_urls: dict[str, str] | None = None, override: bool = True) -> FastAPI:
    config = load_config(REPO_CONFIG, env={"ANTHROPIC_API_KEY": API_KEY,
                                           "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "no-overrides"),
                                           **(env or {})})
    runtime = ActivityDeps.build(config, store, base_urls=base_urls)
    app = FastAPI()
    app.state.services = Services(config=config, store=store, runtime=runtime, cards=None, http=httpx.AsyncClient())
    app.include_router(gateway.router)
    if override:
        app.dependency_overrides[openai_tenant] = lambda: "acme"
        app.dependency_overrides[anthropic_tenant] = lambda: "acme"
    return app


def build_full_app(tmp_path: Path, *, store: Store, env: dict[str, str] | None = None,
                   base_urls: dict[str, str] | None = None) -> FastAPI:
    """The whole API as `cardloop api` serves it (middleware, every router, the real token lookup)."""
    config = load_config(REPO_CONFIG, env={"ANTHROPIC_API_KEY": API_KEY,
                                           "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "no-overrides"),
                                           **(env or {})})
    runtime = ActivityDeps.build(config, store, base_urls=base_urls)
    return create_app(Services(config=config, store=store, runtime=runtime, cards=None, http=httpx.AsyncClient()))


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """`app` on a real loopback port (uvicorn): its base URL. For clients that bring their own
    HTTP stack, and for what only a real connection does (a client hanging up mid-stream)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def close_app(app: FastAPI) -> None:
    svc: Services = app.state.services
    asyncio.run(svc.http.aclose())
    # ActivityDeps has no close(): the provider clients it cached hold kept-alive connections.
    for provider in list(svc.runtime._providers.values()):
        provider.close()  # type: ignore[attr-defined]  # every built-in provider has one
    svc.store.close()


def system_text(request: dict[str, Any]) -> str:
    system = request.get("system", [])
    return "\n\n".join(b["text"] for b in system) if isinstance(system, list) else system


def turns(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], "".join(b["text"] for b in m["content"])) for m in request["messages"]]


def reply(model: ScriptedModel, text: str) -> None:
    model.inject(content=[{"type": "text", "text": text}])


def assert_openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    return error


def assert_anthropic_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["message"]
    return body["error"]
