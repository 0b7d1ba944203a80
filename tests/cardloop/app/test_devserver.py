"""TemporalDevServer refuses ports that are taken before it starts anything, and never outlives
the process that started it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cardloop.app.devserver import DevStackError, TemporalDevServer, free_port, port_open


@pytest.mark.parametrize("which", ["port", "ui_port"])
def test_a_taken_port_is_named_before_the_server_starts(which: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        ports = {"port": free_port(), "ui_port": free_port(), which: busy}
        server = TemporalDevServer(**ports, retention=None)
        with pytest.raises(DevStackError, match=f"port {busy} .*already in use"):
            server.start()
        assert server.process is None


OWNER = """
import sys, time
from cardloop.app.devserver import TemporalDevServer
server = TemporalDevServer(port=int(sys.argv[1]), ui_port=None, retention=None).start()
print(server.process.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_server_does_not_outlive_its_owner_killed_with_sigkill() -> None:
    """SIGKILL gives cardloop no chance to stop the server it started (in its own process group,
    so Ctrl-C reaches cardloop first): the watchdog does."""
    port = free_port()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(owner.stdout.readline())  # type: ignore[union-attr]
        assert _alive(server_pid) and port_open(port)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 20
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(server_pid), "the dev server outlived its owner"
        assert not port_open(port)
    finally:
        owner.kill()


def test_a_server_stopped_in_order_leaves_no_watchdog_behind() -> None:
    server = TemporalDevServer(port=free_port(), ui_port=None, retention=None).start()
    dog = server._watchdog
    assert dog is not None and dog.poll() is None
    server.stop()
    assert dog.poll() == 0 and server._watchdog is None


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.partition("=")[::2] for item in raw.split("\0") if item)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_the_server_and_its_watchdog_hold_none_of_our_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    # Processes of our user can read these children's /proc/<pid>/environ (exec made them
    # dumpable), the agent's commands among them: the keys of `cardloop dev` must not be there.
    secrets = {"ANTHROPIC_API_KEY": "sk-ant-" + "api03-devserver-env-test", "CARDLOOP_ADMIN_TOKEN": "adm-devserver",
               "CARDLOOP_GITHUB_TOKEN": "ghp_" + "devserver0env0test", "DATABASE_URL": "postgresql://u:pw@db/x"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TZ", "UTC")
    server = TemporalDevServer(port=free_port(), ui_port=None, retention=None).start()
    try:
        assert server.process is not None and server._watchdog is not None
        for pid in (server.process.pid, server._watchdog.pid):
            env = _environ(pid)
            assert not set(secrets) & set(env), pid
            assert not any(v in "\0".join(env.values()) for v in secrets.values())
            assert env.get("TZ") == "UTC" and "PATH" in env
    finally:
        server.stop()
