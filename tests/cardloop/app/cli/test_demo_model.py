"""`cardloop demo` with a model that refuses the key, cannot be reached, or fails a stage: a
one-line error within seconds and nothing started, or a demo that stops at the failed stage and
says why; tracebacks go to the log file in the data dir, never to the terminal."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardloop.app.devserver import free_port
from cardloop.app.scripted_model import ScriptedModel
from tests.cardloop.app.cli.procs import CLI, isolated_env
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(120)
KEY = "sk-ant-the-right-key-0123"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    server = ScriptedModel(api_key=KEY).start()
    yield server
    server.stop()


def demo(tmp_path: Path, key: str, base_url: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env, _ = isolated_env(tmp_path)
    env.update({"ANTHROPIC_API_KEY": key, "CARDLOOP_PROFILES__CLAUDE__BASE_URL": base_url,
                "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": base_url, **extra})
    return subprocess.run([str(CLI), "demo", "--exit"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=110)


def assert_nothing_started(tmp_path: Path, out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("cardloop: error: the model cannot be used: anthropic at ")
    assert not (tmp_path / "data" / "temporal.sqlite").exists(), "no Temporal server was started"
    assert "starting the dev stack" not in out.stdout
    return line


def test_a_refused_key_is_one_line_before_anything_starts(tmp_path: Path, model: ScriptedModel) -> None:
    out = demo(tmp_path, "sk-ant-bogus", model.url)
    line = assert_nothing_started(tmp_path, out)
    assert "HTTP 401: invalid x-api-key" in line and "check ANTHROPIC_API_KEY" in line
    assert "sk-ant-bogus" not in out.stdout + out.stderr
    # One models-list request per endpoint; no model call was made.
    assert [(r.method, r.path.split("?")[0]) for r in model.requests] == [("GET", "/v1/models")]


def test_an_unreachable_model_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    out = demo(tmp_path, KEY, f"http://127.0.0.1:{free_port()}")
    line = assert_nothing_started(tmp_path, out)
    assert "connection failed" in line and "Connection refused" in line
    assert "no network, or a wrong base_url in [profiles.claude]" in line


def test_the_demo_stops_at_the_first_failed_stage_and_says_why(tmp_path: Path, model: ScriptedModel) -> None:
    model.inject(529, times=1_000)  # every model call: overloaded
    out = demo(tmp_path, KEY, model.url, CARDLOOP_RETRY__OVERLOAD_INITIAL="1s",
               CARDLOOP_RETRY__OVERLOAD_MAX_INTERVAL="1s", CARDLOOP_RETRY__OVERLOAD_DEADLINE="3s")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "the model answered and took the key" in out.stdout
    assert "⟳ retrying: the model is overloaded (attempt 1" in out.stdout
    assert "✗ the demo stops: planning ended failed: gave up: the model is overloaded" in out.stdout
    assert "▶ moved to coding" not in out.stdout
    # The SDK's "Completing activity as failed" tracebacks are in the log file, not the terminal.
    assert "Traceback" not in out.stdout + out.stderr
    log = (tmp_path / "data" / "cardloop.log").read_text()
    assert "Traceback" in log and "overloaded" in log
    assert (tmp_path / "data" / "cardloop.log").stat().st_mode & 0o777 == 0o600
