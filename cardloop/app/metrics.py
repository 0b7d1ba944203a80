"""Prometheus metrics of a worker or an API process (README "Observability").

    GET http://<observability.metrics_host>:<observability.metrics_port>/metrics

serves cardloop's own metrics (cardloop/contracts/metrics.py: stage runs, turns, tokens, cost,
summarizer calls and fallbacks, webhook deliveries, context source failures, and
prometheus_client's process_* metrics) and, on a worker, the Temporal SDK's runtime metrics
(`temporal_*`: task slots, poll and schedule-to-start latencies, workflow and activity
completions, sticky cache), which the SDK's own Prometheus exporter serves on a loopback port
of its own; this endpoint appends them, so Prometheus scrapes one target per pod.

Metrics stay off the API's public port: nothing behind the Ingress exposes them, and Prometheus
scrapes pods inside the cluster without a token.

Stage runs are counted here, by a worker interceptor around StageWorkflow: when the stage's run
returns (or fails) in live execution, never while it is replayed, so a worker that replays a
history after a restart or a cache eviction does not count it again. The workflow's code is
untouched and issues no command for it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from typing import Any

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from temporalio import workflow
from temporalio.exceptions import CancelledError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from cardloop.app.devserver import free_port
from cardloop.contracts import metrics, names

_STATUS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}
# Header lines read at most: a client trickling endless headers must not hold a handler for ever.
MAX_HEADER_LINES = 100


class _HeadTooLarge(Exception):
    """A request line or header longer than the reader's limit (64 KiB), or too many headers."""


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    """The request line, once the headers after it are read (they change nothing in the answer;
    read so that the client is not cut off mid-send)."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout=5)
        for _ in range(MAX_HEADER_LINES):
            if await asyncio.wait_for(reader.readline(), timeout=5) in (b"\r\n", b"\n", b""):
                return line
    except ValueError:  # asyncio's LimitOverrunError, re-raised by readline as a ValueError
        raise _HeadTooLarge from None
    raise _HeadTooLarge


class _StageOutcome(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if workflow.info().workflow_type != names.STAGE_WORKFLOW:
            return await super().execute_workflow(input)
        stage = getattr(input.args[0], "stage", "unknown") if input.args else "unknown"
        try:
            result = await super().execute_workflow(input)
        except (CancelledError, asyncio.CancelledError):
            _count(stage, "cancelled")
            raise
        except workflow.ContinueAsNewError:
            raise
        except Exception:
            _count(stage, "failed")  # the card workflow records the run as failed
            raise
        _count(getattr(result, "stage", stage), getattr(result, "outcome", "unknown"))
        return result


def _count(stage: str, outcome: str) -> None:
    if not workflow.unsafe.is_replaying():
        metrics.STAGE_RUNS.labels(stage, outcome).inc()


class StageOutcomes(Interceptor):
    """Counts cardloop_stage_runs_total{stage, outcome} (see the module's docstring)."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _StageOutcome


def temporal_runtime(port: int | None = None) -> tuple[Runtime, str]:
    """A Temporal Runtime whose metrics the SDK serves on a loopback port; (runtime, its URL).
    Clients connected with it, and their workers, report there."""
    port = port or free_port()
    # Counters with _total, as Prometheus names them (and as ours are): temporal_workflow_completed_total.
    prometheus = PrometheusConfig(bind_address=f"127.0.0.1:{port}", counters_total_suffix=True)
    from cardloop.app.temporal import core_logging

    runtime = Runtime(telemetry=TelemetryConfig(metrics=prometheus, logging=core_logging()))
    return runtime, f"http://127.0.0.1:{port}/metrics"


# Set while this endpoint fetches the SDK's metrics: httpx logs every request at INFO, which put a
# "HTTP Request: GET http://127.0.0.1:<port>/metrics" line in the worker's log at every scrape.
_OWN_FETCH: contextvars.ContextVar[bool] = contextvars.ContextVar("cardloop_metrics_own_fetch", default=False)


class _QuietOwnFetch(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _OWN_FETCH.get()


_HTTPX_LOG = logging.getLogger("httpx")
if not any(isinstance(f, _QuietOwnFetch) for f in _HTTPX_LOG.filters):
    _HTTPX_LOG.addFilter(_QuietOwnFetch())


class MetricsServer:
    """GET /metrics: `registry` in Prometheus' text format, then the SDK's (`sdk_url`), if any."""

    def __init__(self, registry: CollectorRegistry = REGISTRY, *, sdk_url: str | None = None) -> None:
        self.registry = registry
        self.sdk_url = sdk_url
        self._server: asyncio.Server | None = None
        self._http = httpx.AsyncClient(timeout=5.0)
        self.port = 0

    async def exposition(self) -> bytes:
        body = generate_latest(self.registry)
        if self.sdk_url:
            token = _OWN_FETCH.set(True)
            try:
                sdk = await self._http.get(self.sdk_url)
                body += sdk.content if sdk.status_code == 200 else b""
            except httpx.HTTPError:  # the runtime's exporter is starting or gone: ours still count
                pass
            finally:
                _OWN_FETCH.reset(token)
        return body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await _read_head(reader)
            except _HeadTooLarge:
                # Answered, not a traceback in the log and a connection cut without a word.
                line, too_large = b"", True
            else:
                too_large = False
            parts = line.decode("latin-1").split()
            method, path = (parts[0], parts[1].split("?")[0]) if len(parts) >= 2 else ("", "")
            if too_large:
                status, body, kind = 431, b"request line or headers too large: GET /metrics\n", "text/plain"
            elif path != "/metrics":
                status, body, kind = 404, b"not found: GET /metrics\n", "text/plain"
            elif method not in ("GET", "HEAD"):
                status, body, kind = 405, b"GET /metrics\n", "text/plain"
            else:
                status, body, kind = 200, await self.exposition(), CONTENT_TYPE_LATEST
            head = (f"HTTP/1.1 {status} {_STATUS[status]}\r\ncontent-type: {kind}\r\n"
                    f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
            writer.write(head + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def start(self, host: str, port: int) -> MetricsServer:
        self._server = await asyncio.start_server(self._handle, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await self._http.aclose()


__all__ = ["MetricsServer", "StageOutcomes", "temporal_runtime"]
