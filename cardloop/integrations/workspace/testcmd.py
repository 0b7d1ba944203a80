"""The repository's test command: configured per repository ([workspace.test_commands]), else
detected from the files at the workspace's root, in this order:

    pytest      pytest.ini, a [tool.pytest...] table in pyproject.toml, [tool:pytest] in setup.cfg,
                [pytest] in tox.ini, or test_*.py / *_test.py files under tests/ or test/
    npm test    package.json with a "test" script (not npm's placeholder that always fails)
    go test     go.mod
    cargo test  Cargo.toml
    make test   a Makefile with a `test:` target

`run_tests` runs it in the sandbox: (passed, output excerpt) is the evidence a stage's
COMPLETE claim needs.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cardloop.integrations.workspace.sandbox import Sandbox, WorkspaceView
from cardloop.integrations.workspace.tools.base import excerpt

PYTEST = "python -m pytest -q -p no:cacheprovider"
_NPM_PLACEHOLDER = "no test specified"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        return ""


def _uses_pytest(root: Path) -> str | None:
    if (root / "pytest.ini").is_file():
        return "pytest.ini"
    if re.search(r"^\[tool\.pytest", _read(root / "pyproject.toml"), re.MULTILINE):
        return "pyproject.toml [tool.pytest]"
    if re.search(r"^\[tool:pytest\]", _read(root / "setup.cfg"), re.MULTILINE):
        return "setup.cfg [tool:pytest]"
    if re.search(r"^\[pytest\]", _read(root / "tox.ini"), re.MULTILINE):
        return "tox.ini [pytest]"
    for folder in ("tests", "test"):
        if (root / folder).is_dir() and any(p.name.startswith("test_") or p.name.endswith("_test.py")
                                            for p in (root / folder).rglob("*.py")):
            return f"{folder}/test_*.py"
    return None


def detect_test_command(root: Path) -> tuple[str, str] | None:
    """(command, why) for the repository at `root`, or None when nothing says how to test it."""
    why = _uses_pytest(root)
    if why:
        return PYTEST, f"detected: {why}"
    package = _read(root / "package.json")
    if package:
        try:
            script = (json.loads(package).get("scripts") or {}).get("test")
        except (ValueError, AttributeError):
            script = None
        if isinstance(script, str) and script.strip() and _NPM_PLACEHOLDER not in script:
            return "npm test --silent", "detected: package.json scripts.test"
    if (root / "go.mod").is_file():
        return "go test ./...", "detected: go.mod"
    if (root / "Cargo.toml").is_file():
        return "cargo test", "detected: Cargo.toml"
    for name in ("Makefile", "makefile", "GNUmakefile"):
        if re.search(r"^test\s*:", _read(root / name), re.MULTILINE):
            return "make test", f"detected: {name} test target"
    return None


def repository_test_command(repo: str, root: Path, configured: Mapping[str, str]) -> tuple[str, str] | None:
    """The configured command for `repo`, else the detected one."""
    if configured.get(repo, "").strip():
        return configured[repo], "configured in [workspace.test_commands]"
    return detect_test_command(root)


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest class, whatever its name

    passed: bool
    command: str
    output: str        # excerpt: head, tail and the error lines
    exit_code: int | None
    timed_out: bool


def run_tests(command: str, sandbox: Sandbox, root: Path, home: Path, *, timeout: float | None = None,
              max_chars: int = 20_000, stop: threading.Event | None = None,
              view: WorkspaceView | None = None) -> TestRun:
    done = sandbox.run(command, root, home, timeout=timeout, stop=stop, view=view)
    passed = not done.timed_out and done.exit_code == 0
    head = f"$ {command}\n" + (f"timed out after {done.seconds:.0f}s" if done.timed_out
                               else f"exit code {done.exit_code}")
    return TestRun(passed, command, excerpt(f"{head}\n{done.output}", max_chars), done.exit_code, done.timed_out)
