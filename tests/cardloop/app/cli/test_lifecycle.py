"""`cardloop dev` and `cardloop demo` as real processes: one stack per data dir, and SIGTERM or
SIGINT stopping everything they started (the Temporal server included) without a traceback."""

from __future__ import annotations

import asyncio
import fcntl
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cardloop.app.cards import CardService
from cardloop.app.devserver import port_open
from cardloop.app.local import open_store
from cardloop.app.startup import load_config
from cardloop.app.temporal import connect
from cardloop.contracts.payloads import CardRef, CardState
from tests.cardloop.app.cli.procs import CLI, isolated_env, start, temporal_pids, wait_for
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(120)


def assert_all_stopped(data: Path, ports: dict[str, int], *texts: str) -> None:
    assert temporal_pids(data) == [], "the Temporal dev server outlived the command"
    assert not [name for name, port in ports.items() if port_open(port)], "a port is still taken"
    for text in texts:
        assert "Traceback" not in text and "CancelledError" not in text and "KeyboardInterrupt" not in text, text
    # The data dir's lock went with the process.
    with (data / "stack.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


async def card_state(env: dict[str, str], done: Callable[[CardState], bool]) -> CardState:
    config = load_config(None, env)
    with open_store(config) as store:
        client = await connect(config)
        return await CardService(client, store, config).wait_for(
            CardRef.parse("acme/github-projects/PAY-142"), done, timeout=60)


def test_dev_holds_its_data_dir_and_sigterm_stops_everything_quietly(tmp_path: Path) -> None:
    env, ports = isolated_env(tmp_path)
    data = tmp_path / "data"
    dev, out, err = start(["dev", "--scripted"], env, tmp_path, "dev")
    try:
        wait_for(lambda: "Press Ctrl-C" in out.read_text() or dev.poll() is not None, 60, "the dev stack")
        assert dev.poll() is None, err.read_text()
        [server] = temporal_pids(data)
        assert "SCRIPTED MODEL" in out.read_text() and "not a real model" in out.read_text()

        # The README's walkthrough without a key: the scripted model answers the planning stage.
        moved = subprocess.run([str(CLI), "card", "move", "examples/card.json", "--to", "planning"], cwd=ROOT,
                               env=env, capture_output=True, text=True, timeout=60)
        assert moved.returncode == 0, moved.stderr
        assert f"http://127.0.0.1:{ports['ui']}/namespaces/" in moved.stdout  # this stack's UI, not 8233
        assert (data / "cardloop.sqlite").exists()  # the store is in the data dir, beside temporal.sqlite

        # A demo on the same data dir is refused before it touches anything: one server per SQLite file.
        demo = subprocess.run([str(CLI), "demo", "--exit"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60)
        assert demo.returncode == 1, demo.stdout + demo.stderr
        [line] = demo.stderr.strip().splitlines()
        assert f"is in use by `cardloop dev --scripted` (pid {dev.pid}; Temporal on 127.0.0.1:{ports['temporal']}" \
            in line, line
        assert "CARDLOOP_DEV__DATA_DIR" in line
        assert temporal_pids(data) == [server] and not (data / "demo-remote").exists()

        # Watched from here, as the CLI's `card show` would (one client, not a process per poll).
        state = asyncio.run(card_state(env, lambda s: bool(s.history) and s.history[0].stage == "planning"))
        assert state.history[0].outcome == "completed", state.history[0].reason
    finally:
        dev.send_signal(signal.SIGTERM)
        code = dev.wait(60)
    assert code == 0, err.read_text()
    assert_all_stopped(data, ports, out.read_text(), err.read_text())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_demo_stops_the_stack_quietly(tmp_path: Path, sig: signal.Signals) -> None:
    env, ports = isolated_env(tmp_path)
    data = tmp_path / "data"
    demo, out, err = start(["demo", "--exit"], env, tmp_path, "demo")
    try:
        wait_for(lambda: "▶ moved to planning" in out.read_text() or demo.poll() is not None, 60, "the first stage")
        assert demo.poll() is None, err.read_text()
        assert len(temporal_pids(data)) == 1
    finally:
        demo.send_signal(sig)
        code = demo.wait(60)
    assert code == 128 + sig, out.read_text() + err.read_text()
    assert f"{sig.name}: stopping" in err.read_text()
    assert_all_stopped(data, ports, out.read_text(), err.read_text())
