"""What a new user reaches for first (issue 12, "Missing, that users expect"): --version, help text
on every option, the configured ports in `dev --help`. Real processes of the installed script."""

from __future__ import annotations

import os
import subprocess
import tomllib

from tests.cardloop.app.cli.procs import CLI
from tests.conftest import ROOT


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_")}
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, cwd=ROOT, env={**base, **(env or {})},
                          timeout=60)


def test_version_prints_the_installed_version() -> None:
    out = run("--version")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"cardloop {version} (Python ")
