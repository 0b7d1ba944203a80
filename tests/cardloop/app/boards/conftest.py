"""Board adapter fixtures: the bundled config with test overrides, fixture payloads, and a loopback
server that answers like GitHub's GraphQL API (data / errors)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cardloop.contracts.config import Config, load_config

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "fixtures"
TOKEN = "ghp_TESTTOKENthatMustNeverBePrinted0123456"


def fixture_bytes(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


def fixture_json(path: str) -> dict[str, Any]:
    return json.loads(fixture_bytes(path))


def make_config(graphql_url: str = "http://127.0.0.1:9/graphql", **env: str) -> Config:
    """config.toml plus env overrides, as production loads it; tenant maps for every board."""
    base = {
        "CARDLOOP_GITHUB_TOKEN": TOKEN,
        "CARDLOOP_BOARDS__GITHUB__GRAPHQL_URL": json.dumps(graphql_url),
        "CARDLOOP_BOARDS__GITHUB__TENANTS": '{ Octocoders = "octo" }',
        "CARDLOOP_BOARDS__LINEAR__TENANTS": '{ "e2a5c8f1-3b6d-4a9e-8c7f-1d0b2a3e4f56" = "acme" }',
        "CARDLOOP_BOARDS__JIRA__TENANTS": '{ PAY = "payments" }',
        "CARDLOOP_BOARDS__TRELLO__TENANTS": '{ "5f0c1a2b3c4d5e6f7a8b9c0d" = "acme" }',
        "CARDLOOP_BOARDS__TRELLO__CALLBACK_URL": '"https://cardloop.acme.dev/webhooks/trello"',
        "CARDLOOP_BOARDS__GENERIC__TENANTS": '{ ops = "ops-team" }',
    }
    return load_config(env={**base, **env})


def not_found(alias: str, node_id: str) -> dict[str, Any]:
    return {"type": "NOT_FOUND", "path": [alias], "locations": [{"line": 2, "column": 3}],
            "message": f"Could not resolve to a node with the global id of '{node_id}'"}


class FakeGitHub:
    """GitHub's GraphQL endpoint on 127.0.0.1: nodes by global id, answered under the query's
    aliases (`field`, `item`, `content`) as GitHub does, NOT_FOUND errors for unknown ids, and a switch to
    answer something else (an HTTP error, a malformed body) instead."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.default: Callable[[str, str], dict[str, Any] | None] | None = None
        self.override: tuple[int, Any] | None = None
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = json.loads(raw)
                with outer.lock:
                    outer.requests.append({"path": self.path, "authorization": self.headers.get("authorization"),
                                           "query": request["query"], "variables": request["variables"]})
                    status, body = outer.override or (200, outer.answer(request["query"], request["variables"]))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/graphql"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                                        daemon=True)
        self._thread.start()

    def answer(self, query: str, variables: Mapping[str, str]) -> dict[str, Any]:
        data: dict[str, Any] = {}
        errors: list[dict[str, Any]] = []
        for alias in ("field", "item", "content"):
            declared = f"${alias}: ID!" in query
            if declared != (alias in variables) or (f"{alias}: node(id: ${alias})" in query) != declared:
                return {"errors": [{"message": f"Variable ${alias} is declared or used inconsistently"}]}
            if not declared:
                continue
            node_id = variables[alias]
            node = self.nodes.get(node_id) or (self.default(alias, node_id) if self.default else None)
            data[alias] = node
            if node is None:
                errors.append(not_found(alias, node_id))
        return {"data": data, "errors": errors} if errors else {"data": data}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def github_api() -> Iterator[FakeGitHub]:
    server = FakeGitHub()
    yield server
    server.close()
