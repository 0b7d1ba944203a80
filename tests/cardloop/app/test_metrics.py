"""The metrics endpoint (cardloop/app/metrics.py) on real loopback servers."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from cardloop.app.metrics import MetricsServer

pytestmark = pytest.mark.timeout(30)


async def test_a_scrape_logs_nothing_of_its_own_fetch_of_the_sdk_metrics(caplog: pytest.LogCaptureFixture) -> None:
    # Prometheus scrapes every 15 s or so: the endpoint's own GET of the SDK's exporter logged
    # httpx's INFO "HTTP Request: GET http://127.0.0.1:<port>/metrics" each time, a worker's log
    # filling with lines nobody asked for. The scrape itself still gets both sets of metrics.
    sdk_registry = CollectorRegistry()
    Counter("temporal_fake_sdk", "stands in for the SDK's exporter", registry=sdk_registry).inc()
    sdk = await MetricsServer(sdk_registry).start("127.0.0.1", 0)
    ours = CollectorRegistry()
    Counter("cardloop_fake", "one of ours", registry=ours).inc()
    sdk_url = f"http://127.0.0.1:{sdk.port}/metrics"
    server = await MetricsServer(ours, sdk_url=sdk_url).start("127.0.0.1", 0)
    try:
        caplog.set_level(logging.INFO)
        async with httpx.AsyncClient() as http:
            for _ in range(3):
                body = (await http.get(f"http://127.0.0.1:{server.port}/metrics")).text
                assert "cardloop_fake_total 1.0" in body and "temporal_fake_sdk_total 1.0" in body
            other = await http.get(sdk_url)  # anyone else's request through httpx is logged as ever
            assert other.status_code == 200
    finally:
        await server.stop()
        await sdk.stop()
    fetches = [r for r in caplog.records if r.name == "httpx" and sdk_url in r.getMessage()]
    assert len(fetches) == 1, [r.getMessage() for r in fetches]


async def _exchange(port: int, request: bytes) -> bytes:
    """`request` sent as is on a raw connection; what the server answers before it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()


@pytest.mark.parametrize("request_bytes", [
    b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",                    # a request line past 64 KiB
    b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 70_000 + b"\r\n\r\n",   # one header line past it
    b"GET /metrics HTTP/1.1\r\n" + b"X-A: 1\r\n" * 150 + b"\r\n",        # more header lines than read
], ids=["long-request-line", "long-header", "many-headers"])
async def test_a_request_head_too_large_is_answered_431_without_a_traceback(
        request_bytes: bytes, caplog: pytest.LogCaptureFixture) -> None:
    # It was no answer at all (the connection closed) and "Unhandled exception in
    # client_connected_cb" with a traceback in the log: readline's limit error was not caught.
    server = await MetricsServer(CollectorRegistry()).start("127.0.0.1", 0)
    try:
        answer = await _exchange(server.port, request_bytes)
    finally:
        await server.stop()
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:200]
    assert answer.endswith(b"request line or headers too large: GET /metrics\n")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


async def test_after_a_head_too_large_the_endpoint_still_serves_scrapes() -> None:
    ours = CollectorRegistry()
    Counter("cardloop_fake", "one of ours", registry=ours).inc()
    server = await MetricsServer(ours).start("127.0.0.1", 0)
    try:
        await _exchange(server.port, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
        answer = await _exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        await server.stop()
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"cardloop_fake_total 1.0" in answer
