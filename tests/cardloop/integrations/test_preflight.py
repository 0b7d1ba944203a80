"""The model preflight: one real GET of the provider's models list with the profile's key, against
loopback servers that speak each provider's wire format (the Anthropic one is the scripted model),
and against a port nobody listens on."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from cardloop.app.devserver import free_port
from cardloop.app.scripted_model import ScriptedModel
from cardloop.integrations.providers.preflight import check_endpoint
from cardloop.integrations.upstream import UpstreamError

KEY = "sk-ant-right-0123456789"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    server = ScriptedModel(api_key=KEY).start()
    yield server
    server.stop()


def test_anthropic_key_accepted_is_one_get_of_the_models_list(model: ScriptedModel) -> None:
    check_endpoint("anthropic", api_key=KEY, base_url=model.url)
    [request] = model.requests
    assert (request.method, request.path) == ("GET", "/v1/models?limit=1")
    assert request.headers["x-api-key"] == KEY and request.headers["anthropic-version"]


def test_anthropic_401_is_auth_final_and_never_shows_the_key(model: ScriptedModel) -> None:
    with pytest.raises(UpstreamError) as caught:
        check_endpoint("anthropic", api_key="sk-ant-bogus-key-123", base_url=model.url)
    err = caught.value
    assert (err.kind, err.retryable, err.status) == ("auth", False, 401)
    assert "invalid x-api-key" in err.message and "sk-ant-bogus-key-123" not in err.message


def test_a_closed_port_is_a_connection_failure() -> None:
    with pytest.raises(UpstreamError) as caught:
        check_endpoint("anthropic", api_key=KEY, base_url=f"http://127.0.0.1:{free_port()}")
    assert (caught.value.kind, caught.value.retryable) == ("connection", True)
    assert "Connection refused" in caught.value.message


def test_a_server_that_accepts_but_never_answers_times_out() -> None:
    import socket

    with socket.socket() as listener:  # the kernel accepts the connection; nobody reads or writes
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        with pytest.raises(UpstreamError) as caught:
            check_endpoint("anthropic", api_key=KEY, base_url=f"http://127.0.0.1:{port}", read_timeout=0.3)
    assert caught.value.kind == "timeout"


class _Fake(BaseHTTPRequestHandler):
    """OpenAI's and Gemini's answers to a models list with a wrong key, in their own shapes."""

    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def do_GET(self) -> None:
        _Fake.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        if self.path.startswith("/v1/models"):  # OpenAI
            ok = self.headers.get("Authorization") == "Bearer good"
            body: dict[str, Any] = ({"object": "list", "data": [{"id": "m", "object": "model"}]} if ok else
                                    {"error": {"message": "Incorrect API key provided: bad.", "type":
                                               "invalid_request_error", "param": None, "code": "invalid_api_key"}})
        else:  # Gemini
            ok = self.headers.get("x-goog-api-key") == "good"
            body = ({"models": [{"name": "models/gemini-2.5-flash"}]} if ok else
                    {"error": {"code": 403, "message": "API key not valid. Please pass a valid "
                               "API key.", "status": "PERMISSION_DENIED"}})
        data = json.dumps(body).encode()
        self.send_response(200 if ok else (401 if self.path.startswith("/v1/") else 403))
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Fake.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_openai_compatible_and_gemini_wrong_keys_are_auth(fake: str) -> None:
    check_endpoint("openai", api_key="good", base_url=f"{fake}/v1")
    with pytest.raises(UpstreamError) as caught:
        check_endpoint("openai", api_key="bad", base_url=f"{fake}/v1")
    assert caught.value.kind == "auth" and "Incorrect API key" in caught.value.message
    check_endpoint("gemini", api_key="good", base_url=f"{fake}/v1beta")
    with pytest.raises(UpstreamError) as caught:
        check_endpoint("gemini", api_key="bad", base_url=f"{fake}/v1beta")
    assert caught.value.kind == "auth" and "API key not valid" in caught.value.message
    paths = [path for path, _ in _Fake.seen]
    assert paths == ["/v1/models", "/v1/models", "/v1beta/models?pageSize=1", "/v1beta/models?pageSize=1"]
