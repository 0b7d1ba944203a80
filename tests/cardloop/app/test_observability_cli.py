"""`cardloop worker` and `cardloop api` as an operator runs them: with [observability]
metrics_port set, each serves /metrics on that port (the worker's with the Temporal SDK's
metrics), the API never on its public port, and off a terminal both log JSON lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from cardloop.app.devserver import TemporalDevServer, free_port
from tests.stack import NO_SOURCES

pytestmark = pytest.mark.timeout(120)
CLI = Path(sys.executable).parent / "cardloop"


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


def _get(url: str, until: str, timeout: float = 60.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = httpx.get(url, timeout=5)
            if last.status_code == 200 and until in last.text:
                return last
        except httpx.TransportError as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{url} never answered with {until!r}; last: {last!r}")


def test_worker_and_api_serve_metrics_on_their_own_port_and_log_json(temporal_server: TemporalDevServer,
                                                                      tmp_path: Path) -> None:
    env = {**os.environ, **NO_SOURCES, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test",
           "CARDLOOP_TEMPORAL__ADDRESS": temporal_server.address,
           "CARDLOOP_TEMPORAL__TASK_QUEUE": f"obs-cli-{uuid.uuid4().hex[:8]}",
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false", "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}",
           "CARDLOOP_GENERIC_WEBHOOK_SECRET": "s3cret", "PYTHONUNBUFFERED": "1"}
    worker_port, api_port, api_metrics_port = free_port(), free_port(), free_port()
    worker, worker_out = _spawn("worker", env={**env, "CARDLOOP_OBSERVABILITY__METRICS_PORT": str(worker_port)})
    api, api_out = _spawn("api", "--port", str(api_port),
                          env={**env, "CARDLOOP_OBSERVABILITY__METRICS_PORT": str(api_metrics_port)})
    try:
        worker_out.wait_for(f"metrics on http://127.0.0.1:{worker_port}/metrics")
        scraped = _get(f"http://127.0.0.1:{worker_port}/metrics", "temporal_worker_task_slots_available")
        assert scraped.headers["content-type"].startswith("text/plain")
        assert "# TYPE cardloop_stage_runs_total counter" in scraped.text
        assert "temporal_num_pollers" in scraped.text  # the runtime the worker's client was connected with
        assert httpx.get(f"http://127.0.0.1:{worker_port}/other").status_code == 404

        _get(f"http://127.0.0.1:{api_port}/healthz", "ok")
        refused = httpx.post(f"http://127.0.0.1:{api_port}/webhooks/generic", content=b'{"card_id": "X-1"}',
                             headers={"content-type": "application/json"})
        assert refused.status_code == 401
        assert httpx.get(f"http://127.0.0.1:{api_port}/metrics").status_code == 404  # not on the public port
        api_metrics = _get(f"http://127.0.0.1:{api_metrics_port}/metrics",
                           'cardloop_webhook_deliveries_total{board="generic",result="refused"} 1.0').text
        assert "temporal_" not in api_metrics
        line = api_out.wait_for("webhook refused")
        record = json.loads(line)  # stdout is a pipe, not a terminal: JSON lines
        assert record["level"] == "warning" and record["logger"] == "cardloop.app.api.webhooks"
    finally:
        codes = _stop(worker), _stop(api)
    assert codes[0] == 0, worker_out.seen  # the API exits as uvicorn does on SIGINT
    assert not any("Traceback" in line for line in worker_out.seen + api_out.seen)



@pytest.mark.parametrize("command", [["api", "--port", "free"], ["worker"]])
def test_a_metrics_port_in_use_is_one_line_naming_the_setting(command: list[str], tmp_path: Path) -> None:
    import socket

    env = {**os.environ, **NO_SOURCES, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test",
           "CARDLOOP_TEMPORAL__ADDRESS": f"127.0.0.1:{free_port()}", "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}"}
    with socket.socket() as taken:  # another process (a second worker on the node) holds the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [str(free_port()) if part == "free" else part for part in command]  # --port 0 is refused
        done = subprocess.run([str(CLI), *command], env={**env, "CARDLOOP_OBSERVABILITY__METRICS_PORT": str(port)},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"127.0.0.1:{port}" in last and "CARDLOOP_OBSERVABILITY__METRICS_PORT" in last, last
