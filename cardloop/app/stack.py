"""Running the service: a worker against any Temporal, or the embedded dev stack."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta

import uvicorn
from temporalio.client import Client

from cardloop.activities.deps import ActivityDeps
from cardloop.app.codec import AesGcmCodec, KeyRing, keyring
from cardloop.app.devserver import DevStackError, TemporalDevServer, free_port, port_open
from cardloop.app.jsonlogs import configure_logging
from cardloop.app.lifecycle import StackLock, data_dir_lock, finish_in_thread, wait_for_stop
from cardloop.app.local import data_dir, open_store
from cardloop.app.observability import start_observability
from cardloop.app.temporal import TemporalLink, connect, connect_with_backoff
from cardloop.app.worker import CardloopWorker, build_worker
from cardloop.app.worker_health import WorkerHealth
from cardloop.contracts.config import Config
from cardloop.store import Store

logger = logging.getLogger(__name__)


@dataclass
class RunningStack:
    client: Client
    store: Store
    runtime: ActivityDeps
    server: TemporalDevServer | None
    api_url: str | None = None
    codec_url: str | None = None

    @property
    def ui_url(self) -> str | None:
        return self.server.ui_url if self.server else None


# How long the dev stack waits for its in-process worker to stop before it stops the server
# anyway: an activity in a thread (a model call, a test run in the sandbox) may not notice the
# cancel, and the server must go in any case.
WORKER_STOP_SECONDS = 10.0


@contextlib.asynccontextmanager
async def dev_stack(config: Config, *, base_urls: dict[str, str] | None = None,
                    pick_free_ports: bool = False, with_api: bool = False,
                    command: str = "dev", lock: StackLock | None = None) -> AsyncIterator[RunningStack]:
    """Temporal dev server (SQLite file in the data dir) + store + an in-process worker.

    The data dir is locked for as long as the server runs (app/lifecycle.py): a second stack on
    it is refused with DataDirBusy before anything starts (`lock`: the caller took it already).
    Cancelled anywhere (SIGINT, SIGTERM under run_until_stopped), it stops all it started, the
    server last."""
    root = data_dir(config)
    with contextlib.nullcontext(lock) if lock is not None else data_dir_lock(root, command) as lock:
        port, ui_port = config.dev.temporal_port, config.dev.ui_port
        if pick_free_ports and (port_open(port) or port_open(ui_port)):
            port, ui_port = free_port(), free_port()
        ring = keyring(config, address=f"127.0.0.1:{port}")
        # The codec server's socket is bound now, before the Temporal UI is told its URL: a port
        # picked free and bound later can be taken meanwhile (another stack, a parallel test).
        codec_socket = reserve_loopback(config.codec_server.port, pick_free_ports) if ring is not None and ui_port \
            else None
        codec_url = f"http://127.0.0.1:{codec_socket.getsockname()[1]}" if codec_socket is not None else None
        server = TemporalDevServer(port=port, ui_port=ui_port, db_file=root / "temporal.sqlite",
                                   retention=config.dev.retention, log_file=root / "temporal.log",
                                   codec_endpoint=codec_url)
        codec = None
        try:
            await finish_in_thread(server.start)
            lock.describe(temporal=server.address, ui=server.ui_url)
            if ring is not None and codec_socket is not None:
                codec = await start_codec_server(config, ring, codec_socket, ui_origin=server.ui_url)
            client = await connect(config, address=server.address)
            store = open_store(config)
            runtime = ActivityDeps.build(config, store, base_urls=base_urls)
            worker = build_worker(client, runtime)
            task = asyncio.create_task(worker.run())
            api = None
            try:
                if with_api:
                    api = await start_api(config, store, runtime, client)
                    lock.describe(api=f"http://{config.api.host}:{config.api.port}")
                yield RunningStack(client, store, runtime, server,
                                   f"http://{config.api.host}:{config.api.port}" if api else None, codec_url)
            finally:
                if api is not None:
                    await api.stop()
                await stop_worker(worker, task)
                store.close()
        finally:
            if codec is not None:
                await codec.stop()
            if codec_socket is not None:
                codec_socket.close()
            await finish_in_thread(server.stop)


async def stop_worker(worker: CardloopWorker, task: asyncio.Task[None]) -> None:
    """Shut the worker down, waiting WORKER_STOP_SECONDS at most. asyncio.wait, not wait_for:
    wait_for would wait for a cancelled shutdown to finish, and a shutdown waiting on an
    activity thread that ignores its cancel never does."""
    shutdown = asyncio.ensure_future(worker.shutdown())
    done, _ = await asyncio.wait({shutdown, task}, timeout=WORKER_STOP_SECONDS,
                                 return_when=asyncio.ALL_COMPLETED)
    if shutdown not in done or task not in done:
        logger.warning("the worker did not stop within %.0f s; stopping the server anyway", WORKER_STOP_SECONDS)
    for finished in done:
        if not finished.cancelled() and finished.exception() is not None:
            logger.warning("the worker stopped with %r", finished.exception())


class _OwnedServer(uvicorn.Server):
    """uvicorn inside a stack: the stack's owner handles SIGINT/SIGTERM and stops it in order;
    uvicorn's own handlers would stop it first and raise the signal again afterwards."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn calls sys.exit(3) when it cannot bind: raised in a task, SystemExit would end
        # the whole process from inside the event loop, with only a log line to say why.
        try:
            await super().startup(sockets=sockets)
        except SystemExit as err:
            raise OSError(f"the server could not start (uvicorn exit {err.code})") from None


class ApiServer:
    """uvicorn serving the app inside this process's event loop."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None]) -> None:
        self.server = server
        self.task = task

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.gather(self.task, return_exceptions=True)


def reserve_loopback(port: int, pick_free: bool = False) -> socket.socket:
    """A socket listening on 127.0.0.1:`port`, or on a port the system picks when `port` is taken
    (or `pick_free`). Listening, not only bound: nothing else can take the port, not even with
    SO_REUSEADDR (which uvicorn sets), before the server serves on it."""
    if not pick_free:
        with contextlib.suppress(OSError):
            return socket.create_server(("127.0.0.1", port))
    return socket.create_server(("127.0.0.1", 0))


async def serve_in_loop(app: object, host: str, port: int, what: str,
                        sock: socket.socket | None = None) -> ApiServer:
    """uvicorn serving `app` in this event loop, on `sock` when given (bound already). A server
    that cannot start raises DevStackError saying why: uvicorn itself would exit the process
    (SystemExit 3) with only a log line."""
    server = _OwnedServer(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock] if sock is not None else None))
    for _ in range(100):
        if server.started:
            break
        if task.done():
            try:
                await task
            except OSError as err:  # the bind, mostly (see _OwnedServer.startup)
                in_use = " (the port is in use)" if port_open(port, host) else ""
                raise DevStackError(f"the {what} could not start on {host}:{port}{in_use}") from err
            raise DevStackError(f"the {what} did not start on {host}:{port}")
        await asyncio.sleep(0.05)
    return ApiServer(server, task)


async def start_codec_server(config: Config, ring: KeyRing, sock: socket.socket, *,
                             ui_origin: str | None) -> ApiServer:
    """The dev UI decodes payloads through this (loopback only, so no token is needed), on the
    socket the stack reserved for it."""
    from cardloop.app.codec_server import codec_app_for

    origins = [ui_origin, ui_origin.replace("127.0.0.1", "localhost")] if ui_origin else []
    app = codec_app_for(config, AesGcmCodec(ring), host="127.0.0.1", extra_origins=origins)
    return await serve_in_loop(app, "127.0.0.1", sock.getsockname()[1], "codec server", sock)


async def start_api(config: Config, store: Store, runtime: ActivityDeps, client: Client) -> ApiServer:
    from cardloop.app.api.app import build_services, create_app

    if port_open(config.api.port, config.api.host):
        raise DevStackError(f"port {config.api.port} is in use; set CARDLOOP_API_PORT to another one")
    app = create_app(await build_services(config, store, runtime, client))
    return await serve_in_loop(app, config.api.host, config.api.port, "API")


async def run_api(config: Config) -> None:
    """`cardloop api`: the HTTP side alone, against the configured Temporal and store. It serves
    while Temporal is down (webhooks answer 503, /healthz says so) and connects once it is up."""
    from cardloop.app.api.app import build_services, create_app

    configure_logging(config)
    obs = await start_observability(config, worker=False)
    store = open_store(config)
    link = TemporalLink(config, say=lambda line: print(line, flush=True), interceptors=obs.interceptors).start()
    try:
        app = obs.instrument(create_app(await build_services(config, store, client=link)))
        server = uvicorn.Server(uvicorn.Config(app, host=config.api.host, port=config.api.port, lifespan="off",
                                               log_config=None))
        try:
            await server.serve()
        except SystemExit as err:  # uvicorn's sys.exit(3) when it cannot bind: say why, exit 1
            cause = err.__context__  # the OSError uvicorn logged: a host that does not resolve, ...
            try:
                in_use = port_open(config.api.port, config.api.host)
            except OSError:
                in_use = False
            # In use: that says it all (uvicorn's own text repeats the address as a tuple).
            why = ("; the port is in use: set CARDLOOP_API_PORT to another one" if in_use
                   else f": {cause.strerror or cause}" if isinstance(cause, OSError) else "")
            raise DevStackError(f"the API could not start on {config.api.host}:{config.api.port}{why}") from err
    finally:
        await link.close()
        store.close()
        await obs.stop()


async def run_worker(config: Config) -> None:
    """`cardloop worker`: until SIGINT/SIGTERM, then stop polling and give running activities
    worker.graceful_shutdown_seconds to finish (then they are cancelled and retried elsewhere).
    Started while Temporal is down, it keeps trying to connect (one line per attempt) until
    Temporal answers. Probes: worker.health_port serves /livez and /readyz (app/worker_health.py)."""
    w = config.worker
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    configure_logging(config)
    obs = await start_observability(config, worker=True)
    # The probes answer from the start: live and not ready while Temporal is down.
    health = WorkerHealth(interval=w.health_interval)
    try:
        await health.start(w.health_host, w.health_port)
    except OSError as err:
        await obs.stop()
        raise DevStackError(f"the worker's probes cannot listen on {w.health_host}:{w.health_port}: "
                            f"{err.strerror or err} (worker.health_port, CARDLOOP_WORKER__HEALTH_PORT)") from None

    def said(line: str) -> None:
        health.last_error = line
        print(line, flush=True)

    client = await connect_with_backoff(config, said, stop=stop, runtime=obs.runtime, interceptors=obs.interceptors)
    if client is None:
        print("stopped before Temporal was reachable", flush=True)
        await health.stop()
        await obs.stop()
        return
    store = open_store(config)
    runtime = ActivityDeps.build(config, store)
    worker = build_worker(client, runtime, graceful_shutdown=timedelta(seconds=w.graceful_shutdown_seconds))
    health.attach(worker, client)
    task = asyncio.create_task(worker.run())
    print(f"worker on {config.temporal.address} namespace {config.temporal.namespace} "
          f"task queue {config.temporal.task_queue}; store {store.url}"
          + (f"; probes on http://{w.health_host}:{w.health_port}/livez and /readyz" if w.health_port else "")
          + (f"; metrics on {obs.metrics_url}" if obs.metrics_url else ""),
          flush=True)
    await asyncio.wait([task, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    health.draining = True
    crashed = task.exception() if task.done() else None
    if crashed is not None:
        health.failed = f"{type(crashed).__name__}: {crashed}"
    else:
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
    await health.stop()
    store.close()
    await obs.stop()
    if crashed is not None:
        raise crashed


# Serve until SIGINT/SIGTERM (app/lifecycle.py).
wait_for_ctrl_c = wait_for_stop


__all__ = ["DevStackError", "RunningStack", "dev_stack", "open_store", "run_worker", "wait_for_ctrl_c"]
