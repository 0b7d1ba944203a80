"""The prompt gateway when its Anthropic provider answers badly: a loopback server sending the
API's real wire format, cut or garbled (a stream closed before message_stop, an error event
mid-stream, a 200 that is no Message), behind the real anthropic client. The caller gets an
error in its own shape, never a fragment passed off as a finished answer or a bare 500, and
the call's ledger row is settled with what the provider processed."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cardloop.store import Store
from tests.cardloop.app.api.gateway_kit import (
    ANTHROPIC,
    OPENAI,
    assert_anthropic_error,
    assert_openai_error,
    build_app,
    close_app,
)

CARD = "acme/gateway/-"


class RawAnthropic:
    """/v1/messages answered from a queue of (content type, body) with status 200."""

    def __init__(self) -> None:
        self.answers: deque[tuple[str, str]] = deque()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                kind, body = outer.answers.popleft()
                data = body.encode()
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def sse(*events: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events)


START = ("message_start", {"message": {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": [],
    "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1500, "output_tokens": 1}}})
BLOCK = ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
HALF = ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "The first half of the"}})


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[tuple[RawAnthropic, TestClient, Store]]:
    server = RawAnthropic()
    store = Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    app = build_app(tmp_path, store=store, base_urls={"claude": server.url})
    try:
        with TestClient(app) as client:
            yield server, client, store
    finally:
        close_app(app)
        server.close()


def stream(client: TestClient, path: str) -> str:
    r = client.post(path, json={"model": "m", "max_tokens": 100, "stream": True,
                                "messages": [{"role": "user", "content": "go"}]})
    assert r.status_code == 200, r.text  # the stream had started: the failure is in its events
    return r.text


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_a_stream_the_provider_closes_mid_turn_ends_with_an_error_not_a_finish(
        raw: tuple[RawAnthropic, TestClient, Store], path: str) -> None:
    """It ended with finish_reason "stop" / message_stop and a "done" row of 1 output token."""
    server, client, store = raw
    server.answers.append(("text/event-stream", sse(START, BLOCK, HALF)))
    text = stream(client, path)
    assert "The first half of the" in text
    if path == OPENAI:
        assert "[DONE]" not in text and '"finish_reason":"stop"' not in text
        assert json.loads(text.strip().split("\n")[-1].removeprefix("data: "))["error"]["code"] == "bad_response"
    else:
        assert "message_stop" not in text and "event: error" in text
    [row] = store.ledger(CARD)
    assert row.status == "failed" and row.input_tokens == 1500 and row.output_tokens >= 2
    assert "the provider's stream failed (bad_response)" in (row.note or "")


def test_an_overload_inside_the_stream_reaches_the_caller_as_an_overload(
        raw: tuple[RawAnthropic, TestClient, Store]) -> None:
    """It was classified by the stream's 200: the caller read invalid_request_error, not to be retried."""
    server, client, _ = raw
    server.answers.append(("text/event-stream", sse(START, BLOCK, HALF, ("error", {"error": {
        "type": "overloaded_error", "message": "Overloaded"}}))))
    text = stream(client, ANTHROPIC)
    error = json.loads(text.strip().split("\n")[-1].removeprefix("data: "))
    assert error["error"]["type"] == "overloaded_error"
    assert "retry later" in error["error"]["message"]


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
@pytest.mark.parametrize(("kind", "body"), [
    ("application/json", "{not json"),
    ("application/json", json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})),
    ("text/event-stream", ""),
])
def test_an_answer_that_is_no_message_is_503_and_its_row_closed(raw: tuple[RawAnthropic, TestClient, Store],
                                                                 path: str, kind: str, body: str) -> None:
    """These were a 500 "internal error" with the call's row left "calling" for ever."""
    server, client, store = raw
    server.answers.append((kind, body))
    streamed = kind == "text/event-stream"
    r = client.post(path, json={"model": "m", "max_tokens": 100, "stream": streamed,
                                "messages": [{"role": "user", "content": "go"}]})
    if path == OPENAI:
        assert assert_openai_error(r, 503)["type"] == "server_error"
    else:
        assert assert_anthropic_error(r, 503)["type"] == "overloaded_error"
    assert [row.status for row in store.ledger(CARD)] == ["failed"]


def test_an_answer_without_usage_is_billed_as_estimated(raw: tuple[RawAnthropic, TestClient, Store]) -> None:
    server, client, store = raw
    server.answers.append(("application/json", json.dumps({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "An answer whose usage the server left out."}]})))
    r = client.post(ANTHROPIC, json={"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "go"}]})
    assert r.status_code == 200, r.text
    [row] = store.ledger(CARD)
    assert row.input_tokens > 0 and row.output_tokens > 5 and row.cost_usd > 0
    assert r.json()["usage"]["output_tokens"] == row.output_tokens
    assert (row.note or "").startswith("the provider reported no usage")
