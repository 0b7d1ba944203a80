"""The run_command sandbox on this machine: real processes, real namespaces where they work."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from cardloop.integrations.workspace.sandbox import Protections, Sandbox, SandboxLimits, detect_protections


def _alive_with(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (host view, every namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and "pytest" not in cmdline:
                found.append(int(entry.name))
    return found


def _sleeping(marker: str) -> list[int]:
    """PIDs of `sleep <marker>` processes themselves (not the shells or workers naming them)."""
    found = []
    for pid in _alive_with(f"sleep {marker}"):
        try:  # it may have ended since it was listed (the kill this test waits for): not sleeping
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
        except OSError:
            continue
        if argv == [b"sleep", marker.encode()]:
            found.append(pid)
    return found


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    cwd, home = tmp_path / "ws", tmp_path / "home"
    cwd.mkdir()
    return cwd, home


def test_a_hanging_command_is_killed_with_its_children(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 997}"
    sandbox = Sandbox(SandboxLimits(timeout=1.0))
    result = sandbox.run(f"sleep {marker} & sleep {marker} & echo started; wait", cwd, home)
    assert result.timed_out and result.exit_code is None
    assert "started" in result.output
    assert _alive_with(f"sleep {marker}") == []


def test_a_child_that_left_the_process_group_dies_in_the_pid_namespace(dirs: tuple[Path, Path]) -> None:
    if not detect_protections().pid_namespace:
        pytest.skip("no PID namespace on this machine: setsid children are documented to survive")
    cwd, home = dirs
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 991}"
    result = Sandbox(SandboxLimits(timeout=1.0)).run(f"setsid sleep {marker} & sleep {marker}; wait", cwd, home)
    assert result.timed_out
    assert _alive_with(f"sleep {marker}") == []


def test_background_children_of_a_finished_command_are_killed(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 983}"
    result = Sandbox().run(f"(sleep {marker} > /dev/null 2>&1 &); echo done", cwd, home)
    assert (result.exit_code, result.timed_out) == (0, False)
    assert _alive_with(f"sleep {marker}") == []


def test_the_environment_has_no_secrets(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, home = dirs
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-secretvalue")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:pw@db/x")
    monkeypatch.setenv("SOMETHING_NOBODY_LISTED", "s3cret-by-another-name")
    result = Sandbox().run("env", cwd, home)
    names = {line.split("=", 1)[0] for line in result.output.splitlines() if "=" in line}
    assert not names & {"ANTHROPIC_API_KEY", "DATABASE_URL", "SOMETHING_NOBODY_LISTED"}
    assert "s3cret" not in result.output and "sk-ant" not in result.output
    assert f"HOME={home}" in result.output


def test_resource_limits_apply_in_the_child(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    sandbox = Sandbox(SandboxLimits(cpu_seconds=7, max_file_mb=1))
    limits = sandbox.run("ulimit -t; ulimit -f", cwd, home)
    assert limits.output.split() == ["7", str(1024 * 1024 // 512)]  # ulimit -f counts 512-byte blocks
    too_big = sandbox.run("head -c 3000000 /dev/zero > big.bin", cwd, home)
    assert too_big.exit_code != 0
    assert (cwd / "big.bin").stat().st_size <= 1024 * 1024


def test_output_is_capped_head_and_tail_kept(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    result = Sandbox(SandboxLimits(output_bytes=2000)).run("echo FIRST; seq 1 100000; echo LAST", cwd, home)
    assert result.exit_code == 0 and result.dropped_bytes > 500_000
    assert result.output.startswith("FIRST") and result.output.rstrip().endswith("LAST")
    assert "bytes of output cut" in result.output and len(result.output) < 2200


def test_no_network_where_the_platform_allows_it(dirs: tuple[Path, Path]) -> None:
    protections = detect_protections()
    if not protections.network_isolated:
        pytest.skip("no network namespace here: " + "; ".join(protections.why_not))
    cwd, home = dirs
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused"
        isolated = Sandbox().run(f"bash -c '{probe}'", cwd, home)
        open_ = Sandbox(SandboxLimits(network=True), detect_protections(network=True)).run(
            f"bash -c '{probe}'", cwd, home)
    finally:
        server.close()
    assert "refused" in isolated.output and "connected" not in isolated.output
    assert "connected" in open_.output


def test_describe_says_which_protections_are_active() -> None:
    lines = Sandbox(SandboxLimits(timeout=30)).describe()
    text = "\n".join(lines)
    assert "timeout 30s" in text and "allow-list" in text
    assert ("no network" in text) == detect_protections().network_isolated
    assert detect_protections() is detect_protections()  # detected once per process


def test_exit_codes_pass_through(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    assert Sandbox().run("exit 3", cwd, home).exit_code == 3
    assert Sandbox().run("pwd", cwd, home).output.strip() == str(cwd)
    assert os.path.isdir(home / "tmp")


_WORKER = """
import sys, threading
from pathlib import Path
from cardloop.integrations.workspace.sandbox import Protections, Sandbox, detect_protections
cwd, home, command, isolated = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
protections = detect_protections() if isolated else Protections(False, False, (), True)
# From a thread of a pool, as the worker runs commands (call_with_heartbeat).
runner = threading.Thread(target=Sandbox(protections=protections).run, args=(command, cwd, home))
runner.start()
runner.join()
"""


@pytest.mark.parametrize("isolated", [True, False], ids=["namespaces-if-any", "no-namespaces"])
def test_a_command_dies_with_a_worker_killed_by_sigkill(dirs: tuple[Path, Path], isolated: bool) -> None:
    """A worker SIGKILLed mid-command leaves nothing running: the retry runs the command
    again elsewhere, so the first must not go on in a workspace nobody owns."""
    cwd, home = dirs
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 977}"
    command = f"sleep {marker} & (sleep {marker} > /dev/null 2>&1 &); touch started; wait"
    worker = subprocess.Popen([sys.executable, "-c", _WORKER, str(cwd), str(home), command, "1" if isolated else "0"])
    try:
        deadline = time.monotonic() + 20
        while not (cwd / "started").exists():
            assert time.monotonic() < deadline and worker.poll() is None, "the command never started"
            time.sleep(0.05)
        # `touch started` can run before the detached subshell has exec'd its sleep (a loaded
        # machine): wait for both.
        while len(_sleeping(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_sleeping(marker)) == 2
        worker.kill()
        worker.wait()
        deadline = time.monotonic() + 5
        while _sleeping(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sleeping(marker) == []
    finally:
        worker.kill()
        worker.wait()
        for pid in _sleeping(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_stopped_command_is_killed_at_once(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 971}"
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    result = Sandbox(SandboxLimits(timeout=60)).run(f"sleep {marker} & echo started; wait", cwd, home, stop=stop)
    assert result.stopped and not result.timed_out and result.exit_code is None
    assert result.seconds < 5 and "started" in result.output
    assert _sleeping(marker) == []


def test_signals_and_exit_codes_come_through_the_supervisor(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    plain = Sandbox(protections=Protections(False, False, (), True))
    assert plain.run("kill -TERM $$", cwd, home).exit_code == -signal.SIGTERM
    assert plain.run("kill -KILL $$", cwd, home).exit_code == -signal.SIGKILL
    missing = plain.run("exec /nonexistent/tool", cwd, home)
    assert missing.exit_code == 127 and "/nonexistent/tool" in missing.output
