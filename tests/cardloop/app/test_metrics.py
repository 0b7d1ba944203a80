"""The metrics endpoint (cardloop/app/metrics.py) on real loopback servers."""

from __future__ import annotations

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
