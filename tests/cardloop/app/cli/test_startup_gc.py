"""The collector is off while a command starts (its objects live as long as the process) and on
again, with start-up's objects frozen, before the command's own work. Each case runs in a fresh
interpreter: gc.freeze() is for good, and this one's collector is pytest's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# As the console script runs a command (run() pauses the collector first), recording where
# resume() came: which modules were loaded by then and how many collections had run.
PROBE = """
import contextlib, gc, io, json, sys
from cardloop.app.cli import startup_gc
from cardloop.app.cli.main import main

seen = []
resume = startup_gc.resume
def recording_resume():
    seen.append({"temporal": "temporalio.client" in sys.modules, "config": "cardloop.contracts.config" in sys.modules,
                 "collections": sum(s["collections"] for s in gc.get_stats()) - before})
    resume()
startup_gc.resume = recording_resume
before = sum(s["collections"] for s in gc.get_stats())
startup_gc.pause()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "seen": seen, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def probe(tmp_path: Path, *argv: str) -> dict:
    env = {**os.environ, "HOME": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}",
           "CARDLOOP_TEMPORAL__ADDRESS": "127.0.0.1:1"}  # nothing listens: card show says what the store holds
    run = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_a_card_command_starts_without_a_collection_and_works_with_the_collector_on(tmp_path: Path) -> None:
    got = probe(tmp_path, "card", "show", "acme/github-projects/NOT-THERE")
    assert got["code"] == 2  # not in the store: the command ran to its end
    first = got["seen"][0]
    assert first["temporal"] and first["config"]  # resumed once the command's modules were loaded...
    assert first["collections"] == 0  # ...and no collection scanned them on the way
    assert got["enabled"] and got["frozen"] > 50_000


def test_other_commands_turn_the_collector_on_before_their_work(tmp_path: Path) -> None:
    """`cardloop worker` or `dev` run for days: the collector must be on before they start."""
    got = probe(tmp_path, "prompt", "list")
    assert got["code"] == 0
    assert got["seen"][0] == {"temporal": False, "config": True, "collections": 0}
    assert got["enabled"]


def test_resume_leaves_a_collector_it_did_not_pause_as_it_found_it() -> None:
    code = ("import gc; from cardloop.app.cli import startup_gc; gc.disable(); startup_gc.pause(); "
            "startup_gc.resume(); print(gc.isenabled(), gc.get_freeze_count() == 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert run.stdout.split() == ["False", "True"]
