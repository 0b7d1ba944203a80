"""Temporal down: `cardloop api` and `cardloop worker` start anyway, say so, and work once it is up;
webhooks answer 503 within a board's patience (~10 s; the test's board gives up at 8 s) and
/healthz reports what a probe finds, not what the process hopes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.temporal import TemporalLink, connect
from cardloop.contracts.payloads import CardRef
from cardloop.store import Store
from tests.cardloop.app.api.webhook_kit import SECRET, generic
from tests.cardloop.app.api.webhook_kit import hub_signature as sign
from tests.stack import NO_SOURCES, TRANSCRIPT, make_config, small_card

pytestmark = pytest.mark.timeout(240)
CLI = Path(sys.executable).parent / "cardloop"
BOARD_PATIENCE = 8.0  # boards give up on a webhook after about 10 s


class Lines:
    """A child process's output, read on a thread so the test can wait for a line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.seen.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        with self._cond:
            found = self._cond.wait_for(lambda: next((x for x in self.seen if text in x), None), timeout)
        assert found, f"no line with {text!r} in:\n" + "\n".join(self.seen)
        return found


@pytest.fixture
def outage_env(tmp_path: Path) -> Iterator[tuple[dict[str, str], int]]:
    """An environment pointing at a port where no Temporal listens (yet)."""
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test",
           "CARDLOOP_TEMPORAL__ADDRESS": f"127.0.0.1:{port}", "CARDLOOP_TEMPORAL__RECONNECT_MAX_INTERVAL": "1s",
           "CARDLOOP_TEMPORAL__TASK_QUEUE": f"outage-{uuid.uuid4().hex[:8]}",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}", "CARDLOOP_GENERIC_WEBHOOK_SECRET": SECRET,
           "PYTHONUNBUFFERED": "1", **NO_SOURCES,
           # The test's own client and the spawned processes must agree; the codec has its own tests.
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}
    yield env, port


def _spawn(*args: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], Lines]:
    proc = subprocess.Popen([str(CLI), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    return proc, Lines(proc)


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(10)


async def _health(http: httpx.AsyncClient, base: str, want: str, timeout: float = 60.0) -> dict[str, str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: object = None
    while loop.time() < deadline:
        try:
            r = await http.get(f"{base}/healthz")
            last = r.json()
            if r.status_code == 200 and last["temporal"] == want:
                return last
        except httpx.TransportError as exc:
            last = exc
        await asyncio.sleep(0.2)
    raise AssertionError(f"/healthz never said temporal={want!r}; last: {last!r}")


async def _webhook(http: httpx.AsyncClient, base: str, card_id: str, delivery: str) -> httpx.Response:
    body = generic(card_id, "testing", delivery)
    return await http.post(f"{base}/webhooks/generic", content=body, timeout=BOARD_PATIENCE,
                           headers={"content-type": "application/json", "x-hub-signature-256": sign(body)})


async def test_api_started_while_temporal_is_down_serves_503_then_works_once_it_is_up(outage_env, tmp_path) -> None:
    env, port = outage_env
    api_port = free_port()
    env = {**env, "CARDLOOP_API_PORT": str(api_port)}
    base = f"http://127.0.0.1:{api_port}"
    proc, out = _spawn("api", env=env)
    server = None
    try:
        async with httpx.AsyncClient() as http:
            health = await _health(http, base, "unavailable")
            assert health["status"] == "ok" and "not reachable" in health["temporal_detail"]
            r = await _webhook(http, base, "DOWN-1", "d-1")
            assert r.status_code == 503 and "redeliver" in r.json()["detail"]
            out.wait_for(f"Temporal at 127.0.0.1:{port} is not reachable (attempt 2: Connection refused); retrying")
            server = TemporalDevServer(port=port, ui_port=None, retention=None,
                                       log_file=tmp_path / "temporal.log")
            await asyncio.to_thread(server.start)
            await _health(http, base, "connected")
            r = await _webhook(http, base, "DOWN-1", "d-1")  # the board's redelivery
            assert r.status_code == 200, r.text
            assert r.json()["events"][0]["status"] == "accepted"
        out.wait_for(f"connected to Temporal at 127.0.0.1:{port} after")
    finally:
        _stop(proc)
        if server is not None:
            server.stop()


def test_api_on_a_taken_port_says_so_and_exits_1(outage_env) -> None:
    env, _ = outage_env
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        api_port = taken.getsockname()[1]
        done = subprocess.run([str(CLI), "api"], env={**env, "CARDLOOP_API_PORT": str(api_port)},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert (f"cardloop: error: the API could not start on 127.0.0.1:{api_port}; the port is in use: "
            "set CARDLOOP_API_PORT to another one") in done.stderr


async def test_webhook_answers_503_within_a_boards_patience_when_temporal_goes_down_later(tmp_path: Path) -> None:
    server = TemporalDevServer(port=free_port(), ui_port=None, db_file=tmp_path / "temporal.sqlite", retention=None,
                               log_file=tmp_path / "temporal.log").start()
    config = make_config(server.address, "later",
                         CARDLOOP_GENERIC_WEBHOOK_SECRET=SECRET, CARDLOOP_TEMPORAL__RPC_TIMEOUT="2s")
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    link = TemporalLink(config, await connect(config))
    try:
        async with httpx.AsyncClient() as out_http:
            svc = Services(config=config, store=store, runtime=None, cards=CardService(link, store, config),  # type: ignore[arg-type]
                           http=out_http, adapters=build_adapters(config, out_http))
            transport = httpx.ASGITransport(app=create_app(svc))
            async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as api:
                assert (await api.get("/healthz")).json()["temporal"] == "connected"
                r = await _webhook(api, "", "LATER-1", "l-1")
                assert r.status_code == 200, r.text
                server.kill()
                r = await asyncio.wait_for(_webhook(api, "", "LATER-2", "l-2"), BOARD_PATIENCE)
                assert r.status_code == 503
                await asyncio.sleep(2.0)  # past the cached probe
                health = (await api.get("/healthz")).json()
                assert health["temporal"] == "unavailable" and health["temporal_detail"]
                server.start()
                await _health(api, "", "connected")
                r = await _webhook(api, "", "LATER-2", "l-2")  # redelivered: the same client reconnected
                assert r.status_code == 200, r.text
                ref = CardRef(tenant="default", board="generic", card_id="LATER-2")
                described = await link.client().get_workflow_handle(ref.workflow_id).describe()
                assert described.workflow_type == "CardWorkflow"  # started (no worker runs it here)
    finally:
        store.close()
        server.stop()


async def test_worker_started_while_temporal_is_down_retries_until_it_appears(outage_env, tmp_path: Path) -> None:
    env, port = outage_env
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    env = {**env, "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url,
           "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url}
    proc, out = _spawn("worker", env=env)
    server = TemporalDevServer(port=port, ui_port=None, retention=None, log_file=tmp_path / "temporal.log")
    store = Store.open(env["DATABASE_URL"])
    try:
        out.wait_for(f"Temporal at 127.0.0.1:{port} is not reachable (attempt 3: Connection refused); retrying in 1 s")
        assert proc.poll() is None
        await asyncio.to_thread(server.start)
        out.wait_for("connected to Temporal at")
        out.wait_for("worker on")
        config = make_config(server.address, env["CARDLOOP_TEMPORAL__TASK_QUEUE"],
                             CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS="false")
        cards = CardService(await connect(config), store, config)
        ref = cards.import_card(small_card("WORKER-1"))
        await cards.move(ref, "testing", delivery_id="t")
        state = await cards.wait_for(ref, lambda s: s.status == "done", timeout=90)
        assert state.history[0].outcome == "completed"
        assert _stop(proc) == 0
    finally:
        _stop(proc)
        store.close()
        model.stop()
        server.stop()


def test_ctrl_c_stops_a_worker_still_waiting_for_temporal(outage_env) -> None:
    env, _ = outage_env
    proc, out = _spawn("worker", env=env)
    out.wait_for("is not reachable (attempt 1")
    assert _stop(proc) == 0
    out.wait_for("stopped before Temporal was reachable")
    assert not any("Traceback" in line for line in out.seen), json.dumps(out.seen, indent=1)
