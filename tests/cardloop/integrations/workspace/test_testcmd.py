"""The repository's test command: configured, else detected; run in the sandbox as evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.integrations.workspace import (
    Sandbox,
    SandboxLimits,
    detect_test_command,
    repository_test_command,
    run_tests,
)
from cardloop.integrations.workspace.manager import WorkspaceManager
from cardloop.integrations.workspace.testcmd import PYTEST
from tests.cardloop.integrations.workspace.conftest import make_card
from tests.stack import SAMPLE_REPO_ENV_ALLOW


@pytest.mark.parametrize(("files", "command"), [
    ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, PYTEST),
    ({"tests/test_a.py": "def test(): pass\n"}, PYTEST),
    ({"package.json": '{"scripts": {"test": "jest"}}'}, "npm test --silent"),
    ({"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'}, None),
    ({"go.mod": "module x\n"}, "go test ./..."),
    ({"Cargo.toml": "[package]\n"}, "cargo test"),
    ({"Makefile": "build:\n\ttrue\ntest: build\n\ttrue\n"}, "make test"),
    ({"Makefile": "build:\n\ttrue\n"}, None),
    ({"README.md": "# nothing to run\n"}, None),
])
def test_detection(tmp_path: Path, files: dict[str, str], command: str | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = detect_test_command(tmp_path)
    assert (found[0] if found else None) == command


def test_configuration_wins_over_detection(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n")
    assert repository_test_command("acme/x", tmp_path, {"acme/x": "make check"}) == (
        "make check", "configured in [workspace.test_commands]")
    assert repository_test_command("acme/y", tmp_path, {"acme/x": "make check"}) == (
        "go test ./...", "detected: go.mod")


def test_the_sample_repository_fails_then_passes(manager: WorkspaceManager) -> None:
    ws = manager.open(make_card())
    command, why = detect_test_command(ws.path) or ("", "")
    assert why == "detected: pyproject.toml [tool.pytest]"
    before = run_tests(command, Sandbox(SandboxLimits(env_allow=SAMPLE_REPO_ENV_ALLOW)), ws.path, ws.home)
    assert not before.passed and before.exit_code == 1
    assert "test_backoff_schedule_caps_at_max_delay" in before.output and "1 failed, 3 passed" in before.output
    retry = ws.path / "app" / "webhooks" / "retry.py"
    retry.write_text(retry.read_text().replace("        return raw\n", "        return min(raw, self.max_delay)\n"))
    after = run_tests(command, Sandbox(SandboxLimits(env_allow=SAMPLE_REPO_ENV_ALLOW)), ws.path, ws.home)
    assert after.passed and "4 passed" in after.output
