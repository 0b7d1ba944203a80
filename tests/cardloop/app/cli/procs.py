"""Helpers for CLI tests that run `cardloop dev` / `cardloop demo` as real processes: an isolated
home, data dir and free ports; finding the Temporal server a command started by its SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cardloop.app.devserver import free_port
from tests.conftest import ROOT
from tests.stack import NO_OUR_PYTEST_PLUGINS, NO_SOURCES

CLI = Path(sys.executable).parent / "cardloop"


def isolated_env(tmp_path: Path) -> tuple[dict[str, str], dict[str, int]]:
    ports = {"temporal": free_port(), "ui": free_port(), "api": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CARDLOOP_"))}
    # Only the dev stack's own settings: the card commands run with them must find that stack's
    # Temporal and store (temporal.address, temporal.ui_url and store.url follow [dev] when unset).
    env = {k: v for k, v in env.items() if k != "DATABASE_URL"}
    env.update({"HOME": str(tmp_path), "CARDLOOP_DEV__DATA_DIR": str(tmp_path / "data"),
                "CARDLOOP_DEV__TEMPORAL_PORT": str(ports["temporal"]), "CARDLOOP_DEV__UI_PORT": str(ports["ui"]),
                "CARDLOOP_API_PORT": str(ports["api"]), "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
                **NO_SOURCES, **NO_OUR_PYTEST_PLUGINS})
    return env, ports


def temporal_pids(data: Path) -> list[int]:
    """Temporal servers running on this data dir's SQLite file, wherever their parent went."""
    needle = str(data / "temporal.sqlite").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def start(args: list[str], env: dict[str, str], tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], Path,
                                                                                     Path]:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([str(CLI), *args], cwd=ROOT, env=env, stdout=o, stderr=e)
    return proc, out, err
