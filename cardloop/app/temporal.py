"""Connecting to Temporal: a local dev server, a self-hosted cluster (TLS, mTLS) or Temporal
Cloud (API key), all from config.toml + the environment. Payloads are pydantic models,
encrypted by the payload codec (app/codec.py) unless temporal.encrypt_payloads is off.

Long-running processes outlive Temporal's outages: `cardloop worker` and `cardloop api` started
while Temporal is down keep trying to connect with backoff (connect_with_backoff), and the API
holds its client in a TemporalLink that answers at once when Temporal is away (webhooks get 503
in well under a board's ~10 s timeout) and probes Temporal's real state for /healthz."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from temporalio.client import Client, Interceptor
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, TLSConfig

from cardloop.app.codec import data_converter
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.retry import words

T = TypeVar("T")
# How long /healthz trusts its last probe: a burst of health checks costs Temporal one RPC.
PROBE_TTL = 1.5


class TemporalUnavailable(ConfigError, RuntimeError):
    """Temporal did not answer. A ConfigError for the CLI (exit 2: often a wrong address), a
    RuntimeError for the webhook route, which answers 503 so the board redelivers."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def _read(path: str, key: str) -> bytes:
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ConfigError(f"temporal.{key}: cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:  # else the SDK's parse error reads as "cannot reach Temporal"
        raise ConfigError(f"temporal.{key}: {path} is not a PEM file (no '-----BEGIN ...' line)")
    return data


def tls_config(config: Config) -> TLSConfig | bool:
    t = config.temporal
    api_key = config.temporal_api_key()
    if not (t.tls or api_key or t.tls_client_cert or t.tls_ca_cert):
        return False
    if bool(t.tls_client_cert) != bool(t.tls_client_key):
        raise ConfigError("temporal.tls_client_cert and temporal.tls_client_key go together")
    return TLSConfig(
        server_root_ca_cert=_read(t.tls_ca_cert, "tls_ca_cert") if t.tls_ca_cert else None,
        domain=t.tls_server_name or None,
        client_cert=_read(t.tls_client_cert, "tls_client_cert") if t.tls_client_cert else None,
        client_private_key=_read(t.tls_client_key, "tls_client_key") if t.tls_client_key else None,
    )


def short_reason(exc: BaseException) -> str:
    """The readable part of the SDK's transport errors ('Connection refused', 'dns error ...')."""
    text = str(exc)
    # The innermost quoted reason: `message: "Connection refused"`, or a dns error's `error: "failed
    # to lookup address information: ..."` (its whole Rust debug print said nothing more to a user).
    found = re.findall(r'message: "([^"]+)"', text) or re.findall(r'error: "([^"]+)"', text)
    if found:
        return found[-1]
    return re.sub(r"^Failed client connect: ", "", text)[:200]


CORE_LOGGER = "temporalio.core"


def core_logging() -> LoggingConfig:
    """The SDK's Rust core logs through Python's logging (`temporalio.core`), not straight to
    stderr: `cardloop dev` writes them to cardloop.log with the rest, and a card command on the
    terminal shows no raw core lines (a --follow whose server went away printed eight)."""
    logger = logging.getLogger(CORE_LOGGER)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())  # no "last resort" print where nothing is configured
    return LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                         forwarding=LogForwardingConfig(logger=logger))


@functools.cache
def default_runtime() -> Runtime:
    """The runtime of clients connected without one of their own (one per process)."""
    return Runtime(telemetry=TelemetryConfig(logging=core_logging()))


async def connect(config: Config, *, address: str | None = None, runtime: Runtime | None = None,
                  interceptors: Sequence[Interceptor] = ()) -> Client:
    """`runtime`: one whose metrics are exported (app/metrics.py); `interceptors`: tracing's
    (app/tracing.py), which the client's workers use too."""
    t = config.temporal
    api_key = config.temporal_api_key()
    tls = tls_config(config)  # a wrong certificate path is a config error, not an outage
    try:
        return await Client.connect(
            address or t.address, namespace=t.namespace, tls=tls,
            api_key=api_key.reveal() if api_key else None,
            data_converter=data_converter(config, address=address or t.address),
            runtime=runtime or default_runtime(), interceptors=interceptors,
        )
    except RuntimeError as exc:
        raise unreachable(address or t.address, t.namespace, exc) from None


def unreachable(address: str, namespace: str, exc: BaseException) -> TemporalUnavailable:
    """What every command says when Temporal does not answer its connect."""
    reason = short_reason(exc)
    return TemporalUnavailable(f"cannot reach Temporal at {address} (namespace {namespace}): {reason}. "
                               "Is the server up? `cardloop dev` starts a local one.", reason)


async def connect_with_backoff(config: Config, say: Callable[[str], None], *, address: str | None = None,
                               stop: asyncio.Event | None = None, first_delay: float = 0.5,
                               runtime: Runtime | None = None,
                               interceptors: Sequence[Interceptor] = ()) -> Client | None:
    """Connect, retrying an unreachable Temporal with backoff up to temporal.reconnect_max_interval,
    saying so on one line per failed attempt. None when `stop` is set first."""
    where = address or config.temporal.address
    delay, attempt = first_delay, 0
    while True:
        attempt += 1
        try:
            client = await connect(config, address=address, runtime=runtime, interceptors=interceptors)
        except TemporalUnavailable as exc:
            say(f"Temporal at {where} is not reachable (attempt {attempt}: {exc.reason}); "
                f"retrying in {words(delay) if delay >= 1 else f'{delay:g} s'}")
        else:
            if attempt > 1:
                say(f"connected to Temporal at {where} after {attempt} attempts")
            return client
        if stop is None:
            await asyncio.sleep(delay)
        else:
            try:
                await asyncio.wait_for(stop.wait(), delay)
                return None
            except TimeoutError:
                pass
        delay = min(delay * 2, config.temporal.reconnect_max_interval)


class TemporalLink:
    """The API's Temporal client, which may not exist yet. Every call through `call` is bounded
    by temporal.rpc_timeout, and fails at once while no connection was ever made."""

    def __init__(self, config: Config, client: Client | None = None, *, address: str | None = None,
                 say: Callable[[str], None] = print, interceptors: Sequence[Interceptor] = ()) -> None:
        self.config = config
        self.interceptors = interceptors
        self.address = address or config.temporal.address
        self._client = client
        self._say = say
        self._task: asyncio.Task[None] | None = None
        self._probed: tuple[float, bool, str] | None = None
        if client is None:
            tls_config(config)  # fail at start on a broken TLS setup

    def start(self) -> TemporalLink:
        """Connect in the background (from a running event loop)."""
        if self._client is None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._connect())
        return self

    async def _connect(self) -> None:
        self._client = await connect_with_backoff(self.config, self._say, address=self.address,
                                                  interceptors=self.interceptors)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def timeout(self) -> float:
        return self.config.temporal.rpc_timeout

    def client(self) -> Client:
        if self._client is None:
            raise TemporalUnavailable(f"Temporal at {self.address} is not reachable yet; still trying")
        return self._client

    async def call(self, what: str, fn: Callable[[Client], Awaitable[T]], *, timeout: float | None = None) -> T:
        """`fn(client)` within the timeout. The SDK retries an unreachable server for ~10 s on
        its own: longer than a board waits for our answer."""
        client = self.client()
        known = self._probed
        if known is not None and not known[1] and time.monotonic() - known[0] < PROBE_TTL:
            # Found down a moment ago: answer now rather than make every webhook wait out the timeout.
            raise TemporalUnavailable(f"Temporal at {self.address} is unavailable ({known[2]})")
        limit = self.timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(fn(client), limit)
        except TimeoutError:
            self._probed = (time.monotonic(), False, f"no answer to {what} within {limit:g} s")
            raise TemporalUnavailable(f"Temporal at {self.address} did not answer {what} within {limit:g} s") from None

    async def status(self) -> tuple[bool, str]:
        """(reachable, words) from a health probe, cached for PROBE_TTL seconds."""
        now = time.monotonic()
        if self._probed is not None and now - self._probed[0] < PROBE_TTL:
            return self._probed[1], self._probed[2]
        if self._client is None:
            ok, detail = False, "connecting (not reachable yet)"
        else:
            try:
                ok = await asyncio.wait_for(self._client.service_client.check_health(), self.timeout)
                detail = "connected" if ok else "not serving"
            except (RPCError, RuntimeError) as exc:
                ok, detail = False, f"unreachable: {short_reason(exc)}"
            except TimeoutError:
                ok, detail = False, f"no answer within {self.timeout:g} s"
        self._probed = (time.monotonic(), ok, detail)
        return ok, detail
