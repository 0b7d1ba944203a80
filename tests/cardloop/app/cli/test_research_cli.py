"""`cardloop research` as a real process: against the session's Temporal server and the scripted
model on loopback, a prompt override from the override directory, models from the environment
and flags; bad input is one line and exit 2, never a traceback."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardloop.app.cli.research import read_artifacts
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.scripted_model import ScriptedModel
from tests.cardloop.app.cli.inproc import run_cli
from tests.cardloop.app.cli.procs import CLI
from tests.research_log import ROOT_CAUSES, generate_log

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


@pytest.fixture
def env(tmp_path: Path, temporal_server: TemporalDevServer, model: ScriptedModel) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CARDLOOP_"))}
    return {**base, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test-0123456789",
            "CARDLOOP_TEMPORAL__ADDRESS": temporal_server.address,
            "CARDLOOP_TEMPORAL__TASK_QUEUE": f"cli-{tmp_path.name}",
            "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url,
            "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "prompts"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}"}


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "build.log"
    path.write_text(generate_log(2 * 1024 * 1024))
    return path


def cardloop(env: dict[str, str], *args: str, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), "research", *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_research_prints_the_report_with_progress_and_figures(env: dict[str, str], log_file: Path,
                                                              model: ScriptedModel, tmp_path: Path) -> None:
    packaged = (Path(__file__).resolve().parents[4] / "prompts" / "templates" / "synthesizer.md").read_text()
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "synthesizer.md").write_text(packaged + "\nHOUSE STYLE: terse, for on-call engineers.\n")
    env = {**env, "CARDLOOP_ANALYST_MODEL": "claude-sonnet-4-6"}
    done = cardloop(env, str(log_file), "--question", "why did the build fail?",
                    "--synthesizer-model", "claude-haiku-4-5")
    assert done.returncode == 0, done.stderr
    for cause in ROOT_CAUSES:
        assert cause in done.stdout
    assert done.stdout.startswith("## Summary")
    assert "analysts [" in done.stderr and "10/10 batches" in done.stderr
    assert re.search(r"research: 40 of \d{3,} chunks analysed \(40 read\) in 10 analyst batches", done.stderr)
    assert "/namespaces/default/workflows/research%2Fdefault%2Fcli%2Fresearch-" in done.stderr
    assert "Traceback" not in done.stderr
    bodies = [r.body for r in model.requests if r.body]
    analysts = [b for b in bodies if "# Research analyst" in str(b["system"])]
    synth = [b for b in bodies if "# Research synthesizer" in str(b["system"])]
    assert analysts and {b["model"] for b in analysts} == {"claude-sonnet-4-6"}   # from the environment
    assert synth and {b["model"] for b in synth} == {"claude-haiku-4-5"}         # from the flag
    assert all("HOUSE STYLE: terse" in str(b["system"]) for b in synth)          # the override file won


@pytest.mark.parametrize(("args", "extra_env", "message"), [
    (["missing.log", "--question", "why?"], {}, "missing.log: no such file"),
    (["{log}", "--question", "   "], {}, "--question: say what to find out"),
    (["{log}", "--question", "why?", "--analyst-model", "gpt-9"], {}, "research analyst model 'gpt-9'"),
    (["{log}", "--question", "why?"], {"CARDLOOP_SYNTHESIZER_MODEL": "nope-1"}, "research.synthesizer_model"),
    (["{log}", "--question", "why?"], {"ANTHROPIC_API_KEY": ""}, "set ANTHROPIC_API_KEY"),
    (["{log}", "--question", "why?", "--max-chunks", "0"], {}, "--max-chunks: at least 1"),
    (["{empty}", "--question", "why?"], {}, "empty"),
    (["{binary}", "--question", "why?"], {}, "looks binary (not UTF-8 text)"),
    (["{log}", "--question", "why?", "--tenant", "Acme Corp"], {}, "--tenant 'Acme Corp'"),
])
def test_bad_input_is_one_line_and_exit_2(env: dict[str, str], log_file: Path, tmp_path: Path, args: list[str],
                                          extra_env: dict[str, str], message: str) -> None:
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "image.log").write_bytes(b"\xff\xfe" + bytes(range(128, 256)) * 8)  # no NUL, not UTF-8 either
    args = [a.format(log=log_file, empty=tmp_path / "empty.log", binary=tmp_path / "image.log") for a in args]
    # Refused before any Temporal client starts: in this process (inproc.py says why).
    done = run_cli(["research", *args], env={k: v for k, v in {**env, **extra_env}.items() if v}, cwd=Path.cwd())
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_log_with_a_stray_latin1_byte_is_read(tmp_path: Path) -> None:
    # A real log may hold a byte of another encoding: read with a replacement character, not refused.
    log = tmp_path / "app.log"
    log.write_bytes(b"2026-01-01 ERROR caf\xe9 timed out\n" * 50)
    [(_, text)] = read_artifacts([str(log)])
    assert "caf\ufffd timed out" in text


def test_the_scripted_model_takes_its_port_from_dev_model_port(env: dict[str, str], tmp_path: Path) -> None:
    """The scripted model listens on `dev.model_port` when set; a taken one is one line, exit 1.
    A small log: the port is what is tested, not the research of 2 MB."""
    import socket

    log_file = tmp_path / "small.log"
    log_file.write_text(generate_log(64 * 1024))

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = cardloop({**env, "CARDLOOP_DEV__MODEL_PORT": str(port)}, str(log_file), "-q", "why?", "--scripted")
    assert out.returncode == 1, out.stderr
    assert f"the scripted model cannot listen on 127.0.0.1:{port}" in out.stderr
    assert "CARDLOOP_DEV__MODEL_PORT" in out.stderr and "Traceback" not in out.stderr
    out = cardloop({**env, "CARDLOOP_DEV__MODEL_PORT": str(port)}, str(log_file), "-q", "why?", "--scripted")
    assert out.returncode == 0 and f"OFFLINE SCRIPTED MODEL on http://127.0.0.1:{port}" in out.stderr, out.stderr
