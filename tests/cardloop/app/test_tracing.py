"""Tracing is off unless configured; configured by OTEL_EXPORTER_OTLP_ENDPOINT, spans reach an
OTLP/HTTP collector (here a loopback server that decodes the real protobuf request)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from cardloop.app.startup import load_config
from cardloop.app.tracing import start_tracing, tracing_wanted
from cardloop.contracts.config import REPO_CONFIG, Config


def config(**env: str) -> Config:
    return load_config(REPO_CONFIG, env={"CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent", **env})


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, ExportTraceServiceRequest]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append((self.path, self.headers["content-type"], request))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_tracing_is_off_unless_configured() -> None:
    assert not tracing_wanted(config(), environ={})
    assert start_tracing(config(), environ={}, set_global=False) is None
    assert tracing_wanted(config(CARDLOOP_OBSERVABILITY__TRACING="true"), environ={})
    assert tracing_wanted(config(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_wanted(config(), environ={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})


def test_spans_reach_the_otlp_endpoint_named_by_the_environment(collector: Collector,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "cardloop-worker-test")
    tracing = start_tracing(config(), environ=os.environ, set_global=False)
    assert tracing is not None
    with tracing.tracer().start_as_current_span("card move"), tracing.tracer().start_as_current_span("activity"):
        pass
    tracing.shutdown()  # flushes the batch
    [(path, kind, request)] = collector.requests
    assert path == "/v1/traces" and kind == "application/x-protobuf"
    [resource_spans] = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    assert service == "cardloop-worker-test"
    spans = [s for scope in resource_spans.scope_spans for s in scope.spans]
    assert sorted(s.name for s in spans) == ["activity", "card move"]
    parent = next(s for s in spans if s.name == "card move")
    assert next(s for s in spans if s.name == "activity").parent_span_id == parent.span_id
