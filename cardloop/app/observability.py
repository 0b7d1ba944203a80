"""What `cardloop worker` and `cardloop api` start for operators ([observability] in config.toml):
the /metrics endpoint (app/metrics.py; on a worker with the Temporal SDK's runtime metrics) and
tracing (app/tracing.py). Logging is app/jsonlogs.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.runtime import Runtime

from cardloop.app.devserver import DevStackError
from cardloop.app.metrics import MetricsServer, temporal_runtime
from cardloop.app.tracing import Tracing, start_tracing
from cardloop.contracts.config import Config


@dataclass
class Observability:
    runtime: Runtime | None = None  # connect the worker's client with it: its metrics are served
    metrics: MetricsServer | None = None
    tracing: Tracing | None = None
    host: str = "127.0.0.1"

    @property
    def interceptors(self) -> list[Any]:
        return self.tracing.client_interceptors() if self.tracing else []

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.host}:{self.metrics.port}/metrics" if self.metrics else None

    def instrument(self, app: Any) -> Any:
        return self.tracing.instrument(app) if self.tracing else app

    async def stop(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
        if self.tracing is not None:
            self.tracing.shutdown()


async def start_observability(config: Config, *, worker: bool, span_exporter: Any = None,
                              set_global_tracer: bool = True) -> Observability:
    """`worker`: the process runs Temporal workers, whose SDK metrics join /metrics."""
    obs = config.observability
    tracing = start_tracing(config, exporter=span_exporter, set_global=set_global_tracer)
    if not obs.metrics_port:
        return Observability(tracing=tracing)
    runtime, sdk_url = temporal_runtime() if worker else (None, None)
    try:
        server = await MetricsServer(sdk_url=sdk_url).start(obs.metrics_host, obs.metrics_port)
    except OSError as exc:  # a port in use (a second worker on the node) is one line, not a traceback
        if tracing is not None:
            tracing.shutdown()
        raise DevStackError(f"the metrics endpoint cannot listen on {obs.metrics_host}:{obs.metrics_port}: "
                            f"{exc.strerror or exc}; set observability.metrics_port / "
                            "CARDLOOP_OBSERVABILITY__METRICS_PORT to a free port (0: no metrics)") from None
    return Observability(runtime=runtime, metrics=server, tracing=tracing, host=obs.metrics_host)


__all__ = ["Observability", "start_observability"]
