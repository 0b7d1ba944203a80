"""`cardloop worker` probes and shutdown, `cardloop temporal-setup`, and `cardloop dev` wiring the
Temporal UI to its codec server: as an operator runs them, against a real dev server."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cardloop.app.codec import KeyRing
from cardloop.app.devserver import TemporalDevServer, free_port, port_open
from tests.conftest import ROOT
from tests.stack import NO_SOURCES

pytestmark = pytest.mark.timeout(180)
CLI = Path(sys.executable).parent / "cardloop"


def probe(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def wait_for(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not reached")


def base_env(tmp_path: Path, address: str) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path), "CARDLOOP_TEMPORAL__ADDRESS": address,
            "CARDLOOP_DEV__DATA_DIR": str(tmp_path / "data"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}", **NO_SOURCES}


def start_worker(tmp_path: Path, address: str, health: int, **extra: str) -> subprocess.Popen[str]:
    """`cardloop worker` against `address`, its probes on `health`, checking Temporal every 0.3 s."""
    env = {**base_env(tmp_path, address), "CARDLOOP_WORKER__HEALTH_PORT": str(health),
           "CARDLOOP_WORKER__HEALTH_INTERVAL": "0.3", **extra}
    return subprocess.Popen([str(CLI), "worker"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_worker_probes_follow_temporal_and_sigterm_drains(tmp_path: Path) -> None:
    server = TemporalDevServer(port=free_port(), ui_port=None, retention=None, log_file=tmp_path / "t.log").start()
    health = free_port()
    worker = start_worker(tmp_path, server.address, health, CARDLOOP_WORKER__GRACEFUL_SHUTDOWN_SECONDS="5")
    try:
        wait_for(lambda: port_open(health))
        assert wait_for(lambda: probe(health, "/readyz")[0] == 200)
        assert probe(health, "/livez") == (200, {"ok": True, "reason": "worker running"})
        assert probe(health, "/nope")[0] == 404
        server.stop()  # Temporal goes away: unready (restarting would not help), still live
        _, body = wait_for(lambda: (r := probe(health, "/readyz"))[0] == 503 and r)
        assert "Temporal unreachable" in body["reason"]
        assert probe(health, "/livez")[0] == 200
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        server.stop()
    out = worker.stdout.read() if worker.stdout else ""
    assert f"probes on http://127.0.0.1:{health}/livez" in out


def test_a_worker_started_before_temporal_is_live_not_ready_until_it_answers(tmp_path: Path) -> None:
    # Kubernetes' startup probe reads /livez: a worker that served nothing while it waited for
    # Temporal was restarted again and again for as long as Temporal was down.
    port, health = free_port(), free_port()
    worker = start_worker(tmp_path, f"127.0.0.1:{port}", health, CARDLOOP_TEMPORAL__RECONNECT_MAX_INTERVAL="1")
    server = TemporalDevServer(port=port, ui_port=None, retention=None, log_file=tmp_path / "t.log")
    try:
        wait_for(lambda: port_open(health))
        assert probe(health, "/livez") == (200, {"ok": True, "reason": "connecting to Temporal"})
        status, body = probe(health, "/readyz")
        assert status == 503 and body["reason"].startswith("connecting to Temporal")
        server.start()
        assert wait_for(lambda: probe(health, "/readyz")[0] == 200)
        assert probe(health, "/livez") == (200, {"ok": True, "reason": "worker running"})
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        server.stop()


def test_a_taken_probe_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {**base_env(tmp_path, f"127.0.0.1:{free_port()}"),
               "CARDLOOP_WORKER__HEALTH_PORT": str(taken.getsockname()[1])}
        done = subprocess.run([str(CLI), "worker"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the worker's probes cannot listen on 127.0.0.1:" in done.stderr and "Traceback" not in done.stderr


def test_temporal_setup_creates_the_namespace_and_search_attributes_once(tmp_path: Path) -> None:
    with TemporalDevServer(port=free_port(), ui_port=None, retention=None, log_file=tmp_path / "t.log") as server:
        env = {**base_env(tmp_path, server.address), "CARDLOOP_TEMPORAL__NAMESPACE": "cards-prod"}
        first = subprocess.run([str(CLI), "temporal-setup", "--retention", "30d"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        assert "namespace cards-prod: created (retention 30 days)" in first.stdout
        again = subprocess.run([str(CLI), "temporal-setup"], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=120)
        assert again.returncode == 0, again.stderr
        assert "namespace cards-prod: exists" in again.stdout
        for name in ("CardId", "CardStage", "Repo", "Tenant"):
            assert f"search attribute {name} (Keyword): exists" in again.stdout
        listed = subprocess.run([str(server.binary), "operator", "search-attribute", "list", "--namespace",
                                 "cards-prod", "--address", server.address], capture_output=True, text=True, timeout=30)
        assert all(name in listed.stdout for name in ("CardId", "CardStage", "Repo", "Tenant"))
        bad = subprocess.run([str(CLI), "temporal-setup", "--retention", "forever"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "retention 'forever'" in bad.stderr


def test_dev_wires_the_ui_to_its_codec_server(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    env = {**base_env(tmp_path, f"127.0.0.1:{port}"), "CARDLOOP_DEV__TEMPORAL_PORT": str(port),
           "CARDLOOP_DEV__UI_PORT": str(ui), "CARDLOOP_API_PORT": str(free_port())}
    dev = subprocess.Popen([str(CLI), "dev"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        seen: list[str] = []

        def banner() -> str | None:
            seen.append(dev.stdout.readline())
            if not seen[-1] and dev.poll() is not None:  # ended: say what it printed, not "not reached"
                raise AssertionError(f"cardloop dev exited {dev.returncode}:\n{''.join(seen)}")
            return seen[-1] if "decodes payloads through" in seen[-1] else None

        line = wait_for(banner)
        codec_url = line.split("decodes payloads through ")[1].split(")")[0]
        codec_port = int(codec_url.rsplit(":", 1)[1])
        # The dev server runs with the UI pointed at that endpoint, and the endpoint decodes.
        args = subprocess.run(["ps", "-ww", "-o", "args=", "-C", "temporal"], capture_output=True, text=True).stdout
        assert f"--ui-codec-endpoint {codec_url}" in args
        req = urllib.request.Request(f"{codec_url}/encode", data=b'{"payloads": []}', method="POST",
                                     headers={"content-type": "application/json",
                                              "origin": f"http://127.0.0.1:{ui}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200 and r.headers["access-control-allow-origin"] == f"http://127.0.0.1:{ui}"
        assert (tmp_path / "data" / "codec.keys").is_file()
        assert port_open(codec_port)
    finally:
        dev.send_signal(signal.SIGINT)
        assert dev.wait(60) == 0


def codec_call(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200
        return json.loads(r.read())


def test_codec_server_serves_and_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    env = {**base_env(tmp_path, "127.0.0.1:1"), "CARDLOOP_CODEC_KEYS": KeyRing.generate("op-key").to_text()}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run([str(CLI), "codec-server", "--port", str(port)], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert f"the codec server cannot listen on 127.0.0.1:{port}: Address already in use" in refused.stderr
    assert "codec server on" not in refused.stdout  # no banner naming a URL that does not answer
    port = free_port()
    server = subprocess.Popen([str(CLI), "codec-server", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert f"codec server on http://127.0.0.1:{port}" in server.stdout.readline()
        plain = {"payloads": [{"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                               "data": base64.b64encode(b'"hello"').decode()}]}
        # Listening before the banner: no wait is needed for the first request.
        encoded = codec_call(port, "encode", plain)
        assert encoded["payloads"][0]["data"] != plain["payloads"][0]["data"]
        assert codec_call(port, "decode", encoded) == plain
    finally:
        server.send_signal(signal.SIGINT)
        # uvicorn shuts down gracefully: exit 0, no traceback.
        assert server.wait(30) == 0
    assert "Traceback" not in server.stdout.read()
