"""The worker's health for Kubernetes probes: a tiny HTTP endpoint in the worker's own event loop.

    GET /livez   200 while the worker runs; 503 once it stopped on an error. Served from the
                 worker's event loop, so a loop that is blocked fails the probe too (timeout).
    GET /readyz  200 while the worker runs, is not draining after SIGTERM, and Temporal answered
                 its health check within the last 3 intervals; else 503 with the reason.

An unreachable Temporal makes the worker unready, never unlive: restarting it would not help,
and its pollers reconnect on their own when Temporal is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

from temporalio.client import Client
from temporalio.worker import Worker

_STATUS = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}


class WorkerHealth:
    """Served from the worker's start, before Temporal first answers: a worker still connecting is
    live and not ready (a startup probe that found no port would have the pod restarted for as
    long as Temporal is down). `attach` hands it the worker once connected."""

    def __init__(self, worker: Worker | None = None, client: Client | None = None, *, interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.worker = worker
        self.client = client
        self.interval = interval
        self.clock = clock
        self.last_ok: float | None = None
        self.last_error = "no Temporal health check yet"
        self.draining = False
        self.failed: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._server: asyncio.Server | None = None

    def live(self) -> tuple[bool, str]:
        if self.failed:
            return False, f"worker stopped: {self.failed}"
        if self.worker is None:
            return True, "connecting to Temporal"
        return True, "worker running" if self.worker.is_running else "worker starting"

    def ready(self) -> tuple[bool, str]:
        if self.draining:
            return False, "draining after SIGTERM"
        if self.worker is None:
            return False, f"connecting to Temporal: {self.last_error}"
        if self.failed or not self.worker.is_running:
            return False, self.failed or "worker not running"
        if self.last_ok is None or self.clock() - self.last_ok > 3 * self.interval:
            return False, f"Temporal unreachable: {self.last_error}"
        return True, "polling"

    async def _watch(self) -> None:
        assert self.client is not None
        while True:
            try:
                await asyncio.wait_for(self.client.service_client.check_health(), timeout=self.interval)
                self.last_ok = self.clock()
            except Exception as exc:  # any failure is the reason the worker is unready
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            await asyncio.sleep(self.interval)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=5)
            parts = line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            check = {"/livez": self.live, "/healthz": self.live, "/readyz": self.ready}.get(path)
            ok, reason = check() if check else (False, "not found")
            status = 200 if ok else (503 if check else 404)
            body = json.dumps({"ok": ok, "reason": reason}).encode()
            writer.write(f"HTTP/1.1 {status} {_STATUS[status]}\r\ncontent-type: application/json\r\n"
                         f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def attach(self, worker: Worker, client: Client) -> None:
        """The worker, once Temporal answered: readiness follows Temporal's health from now on."""
        self.worker, self.client = worker, client
        self._tasks.append(asyncio.create_task(self._watch()))

    async def start(self, host: str, port: int) -> None:
        if self.worker is not None and self.client is not None:
            self._tasks.append(asyncio.create_task(self._watch()))
        if port:
            self._server = await asyncio.start_server(self._handle, host, port)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
