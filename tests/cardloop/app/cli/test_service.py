"""`cardloop dev`, `cardloop card move|say|show` and `cardloop demo` as a user runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cardloop.app.devserver import free_port, port_open
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from tests.conftest import EXAMPLE_CARD, ROOT
from tests.stack import NO_SOURCES

pytestmark = pytest.mark.timeout(240)
CLI = Path(sys.executable).parent / "cardloop"


def run(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


@pytest.fixture
def dev_env(tmp_path: Path):
    model = ScriptedModel(load_transcript(ROOT / "examples" / "transcript.json")).start()
    port, ui = free_port(), free_port()
    env = {**os.environ, "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-test",
           "CARDLOOP_DEV__DATA_DIR": str(tmp_path / "data"), "CARDLOOP_DEV__TEMPORAL_PORT": str(port),
           "CARDLOOP_DEV__UI_PORT": str(ui), "CARDLOOP_TEMPORAL__ADDRESS": f"127.0.0.1:{port}",
           "CARDLOOP_API_PORT": str(free_port()),
           "DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'cardloop.sqlite'}",
           "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url,
           **NO_SOURCES}
    yield env, port, ui
    model.stop()


def test_dev_stack_runs_cards_from_the_cli_and_stops_on_ctrl_c(dev_env, tmp_path: Path) -> None:
    env, port, ui = dev_env
    dev = subprocess.Popen([str(CLI), "dev"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        deadline = time.monotonic() + 60
        while not (port_open(port) and port_open(ui)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert port_open(ui), "the Temporal UI is served"
        out = run("card", "move", str(EXAMPLE_CARD), "--to", "review", "--delivery-id", "d1", env=env)
        assert out.returncode == 0, out.stderr
        assert "card acme/github-projects/PAY-142 -> review" in out.stdout
        out = run("card", "say", "acme/github-projects/PAY-142", "Please check the jitter cap.", "--author", "priya",
                  env=env)
        assert out.returncode == 0, out.stderr
        for _ in range(200):
            shown = run("card", "show", "acme/github-projects/PAY-142", "--json", "--last", "500", env=env)
            data = json.loads(shown.stdout)
            if data["state"] and data["state"]["status"] == "done":
                break
            time.sleep(0.3)
        assert data["state"]["status"] == "done"
        assert any(m["content"] == "Please check the jitter cap." for m in data["messages"])
        assert data["usage"]["total"]["calls"] >= 2
        assert data["usage"]["own"]["calls"] + data["usage"]["extra"]["calls"] == data["usage"]["total"]["calls"]
        text = run("card", "show", "PAY-142", "--tenant", "acme", "--board", "github-projects", env=env)
        assert "stage done" in text.stdout and "usage:" in text.stdout
        assert "(retries included)" in text.stdout
        assert "not kept: 0 call(s) whose reply the card did not keep" in text.stdout
    finally:
        dev.send_signal(signal.SIGINT)
        code = dev.wait(60)
    assert code == 0, dev.stdout.read() if dev.stdout else ""
    assert not port_open(port), "Ctrl-C stopped the Temporal server too"


def test_card_commands_give_clear_errors(dev_env, tmp_path: Path) -> None:
    env, _, _ = dev_env
    out = run("card", "move", "acme/github/NOPE", "--to", "coding", env=env)
    assert out.returncode == 2
    assert "cannot reach Temporal" in out.stderr or "not known" in out.stderr
    out = run("card", "move", str(tmp_path / "missing.json"), "--to", "coding", env=env)
    assert out.returncode == 2 and "no such file" in out.stderr
    (tmp_path / "cards.json").mkdir()  # a directory named like a card file
    folder = str(tmp_path / "cards.json")
    for command in (("move", folder, "--to", "coding"), ("say", folder, "hi")):
        out = run("card", *command, env=env)
        assert out.returncode == 2 and "cannot read: Is a directory" in out.stderr and "Traceback" not in out.stderr
    out = run("card", "move", "a/b/c/d", "--to", "coding", env=env)
    assert out.returncode == 2 and "expected CARD" in out.stderr
    out = run("card", "move", "PAY-1", "--to", "deploying", env=env)
    assert out.returncode == 2 and "invalid choice" in out.stderr
    # A comment with no text, or longer than the history keeps one: refused before anything is sent.
    out = run("card", "say", "acme/github-projects/PAY-142", " \n\t", env=env)
    assert out.returncode == 2 and "the comment is empty" in out.stderr and "Traceback" not in out.stderr
    out = run("card", "say", "acme/github-projects/PAY-142", "x" * 32_001, env=env)
    assert out.returncode == 2 and "32,001 characters, over the 32,000" in out.stderr
    assert "Traceback" not in out.stderr and "xxxxxxxxxx" not in out.stderr


def test_demo_runs_offline_and_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env.update({"HOME": str(tmp_path), "CARDLOOP_DEV__DATA_DIR": str(tmp_path / "data"),
                "CARDLOOP_DEV__TEMPORAL_PORT": str(free_port()), "CARDLOOP_DEV__UI_PORT": str(free_port())})
    out = run("demo", "--exit", env=env, timeout=200)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OFFLINE SCRIPTED MODEL" in out.stdout
    for stage in ("planning", "coding", "review", "testing", "error_fixing"):
        assert f"✓ {stage}: completed" in out.stdout
    assert "■ done: 5 stage runs" in out.stdout
    # The card's total counts tokens as each stage's closing line does (cached prompt tokens too):
    # it said 24,631 tokens beside an error_fixing run of 24,586 alone.
    def tokens(line: str) -> int:
        return int(re.search(r"([\d,]+) tokens", line)[1].replace(",", ""))
    closing = [tokens(line) for line in out.stdout.splitlines() if re.match(r"\s+✓ \w+: completed after", line)]
    total = tokens(next(line for line in out.stdout.splitlines() if line.startswith("■ done: 5 stage runs")))
    assert len(closing) == 5 and total >= sum(closing), (total, closing)
    # No board to write to: the demo says what each stage would have told it (issue 13).
    for n, stage in enumerate(("planning", "coding", "review", "testing", "error_fixing"), 1):
        assert f"board: would comment: cardloop · {stage} (run {n}) completed." in out.stdout
    # Why nothing was sent is said once; the later lines point back to it.
    assert out.stdout.count("cardloop has no client to write to it") == 1
    assert "(skipped, as above)" in out.stdout
    assert "/namespaces/default/workflows/card%2Facme%2Fgithub-projects%2FPAY-142-demo-" in out.stdout
    # The coding agent fixed the sample repository's failing test: the failing run, the edit, the
    # passing run, the verified finish and the commit on the card's branch in the local remote.
    coding = out.stdout.split("▶ moved to coding")[1].split("▶ moved to review")[0]
    assert "✗ 1 failed, 3 passed" in coding and "⚙ edit_file app/webhooks/retry.py" in coding
    # Every turn is said once, in order, however quickly the scripted model answers it.
    turns = [line.strip() for line in coding.splitlines() if line.strip().startswith("… turn ")]
    assert turns == [f"… turn {n}: assembling the prompt and asking the model" for n in range(1, 6)], turns
    assert "→ 4 passed" in coding and "☑ Verification passed" in coding
    assert "⎇ 1 commit(s) pushed to the card's branch" in coding
    remote = tmp_path / "data" / "demo-remote" / "acme" / "payments-api.git"
    branch = next(line.split(" branch ")[1].split(":")[0]
                  for line in out.stdout.splitlines() if line.startswith("⎇ file://"))
    fixed = subprocess.run(["git", "-C", str(remote), "show", f"{branch}:app/webhooks/retry.py"],
                           capture_output=True, text=True, check=True).stdout
    assert "capped = min(raw, self.max_delay)\n        if self.jitter:" in fixed


def test_a_second_scripted_dev_on_the_data_dir_names_the_running_one_not_the_model_port(tmp_path: Path) -> None:
    # The same environment twice (CARDLOOP_DEV__MODEL_PORT included, as a user who set it once
    # has): the second is refused for the data dir, naming the running stack, as the README says;
    # it used to say the scripted model's port was taken and to change CARDLOOP_DEV__MODEL_PORT.
    from tests.cardloop.app.cli.procs import isolated_env, start, wait_for

    env, ports = isolated_env(tmp_path)
    env["CARDLOOP_DEV__MODEL_PORT"] = str(free_port())
    dev, out, err = start(["dev", "--scripted"], env, tmp_path, "dev")
    try:
        wait_for(lambda: "Press Ctrl-C" in out.read_text() or dev.poll() is not None, 60, "the dev stack")
        assert dev.poll() is None, err.read_text()
        second = run("dev", "--scripted", env=env, timeout=60)
        assert second.returncode == 1, second.stdout + second.stderr
        [line] = second.stderr.strip().splitlines()
        assert f"is in use by `cardloop dev --scripted` (pid {dev.pid}; Temporal on 127.0.0.1:{ports['temporal']}" \
            in line, line
        assert "SCRIPTED MODEL" not in second.stdout
    finally:
        dev.send_signal(signal.SIGTERM)
        code = dev.wait(60)
    assert code == 0, err.read_text()
