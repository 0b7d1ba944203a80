"""OpenTelemetry traces of a worker or an API process, off unless configured.

On with `[observability] tracing = true` or with OTEL_EXPORTER_OTLP_ENDPOINT set (the exporter
reads the standard OTEL_EXPORTER_OTLP_* variables: endpoint, headers, timeout). Spans:
- Temporal's TracingInterceptor on the client, so on its workers too: a span per workflow run,
  signal, query, child workflow and activity (StartWorkflow:CardWorkflow, RunActivity:llm.complete,
  ...), the trace carried in Temporal's headers from the API's signal-with-start to the activities;
- FastAPI's instrumentation on the API: a span per request (the route's template, never the body).

The SDK and the exporter are the `tracing` extra (`pip install 'cardloop[tracing]'`); configured
without them, start-up stops with a ConfigError saying so."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError

OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTLP_ENDPOINT_VARS = (OTLP_ENDPOINT_ENV, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
EXTRA = "pip install 'cardloop[tracing]'"


def tracing_wanted(config: Config, environ: Mapping[str, str] = os.environ) -> bool:
    return config.observability.tracing or any(environ.get(name) for name in OTLP_ENDPOINT_VARS)


@dataclass
class Tracing:
    provider: Any  # opentelemetry.sdk.trace.TracerProvider

    def tracer(self) -> Any:
        return self.provider.get_tracer("cardloop")

    def client_interceptors(self) -> list[Any]:
        """For Client.connect: the client's calls and its workers' workflows and activities."""
        from temporalio.contrib.opentelemetry import TracingInterceptor

        return [TracingInterceptor(self.tracer())]

    def instrument(self, app: Any) -> Any:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=self.provider, exclude_spans=["receive", "send"])
        return app

    def shutdown(self) -> None:
        self.provider.shutdown()  # flushes what the batch processor still holds


def start_tracing(config: Config, *, exporter: Any = None, environ: Mapping[str, str] = os.environ,
                  set_global: bool = True) -> Tracing | None:
    """A tracer provider exporting over OTLP/HTTP, or to `exporter` (tests: InMemorySpanExporter,
    exported as each span ends); None when tracing is not configured."""
    if exporter is None and not tracing_wanted(config, environ):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise ConfigError(f"tracing is configured but OpenTelemetry's SDK is not installed ({exc.name}): "
                          f"{EXTRA}, or set observability.tracing = false and unset {OTLP_ENDPOINT_ENV}") from None
    name = environ.get("OTEL_SERVICE_NAME") or config.observability.service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(f"tracing is configured but the OTLP exporter is not installed: {EXTRA}") from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if set_global:
        trace.set_tracer_provider(provider)
    return Tracing(provider)


__all__ = ["Tracing", "start_tracing", "tracing_wanted"]
