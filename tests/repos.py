"""A small git repository for the repository source, served over file:// (stack and CLI tests;
the fixture is `repository_env` in tests/conftest.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.email=dev@acme.test", "-c", "user.name=dev", "-c", "init.defaultBranch=main"]


def make_payments_repo(root: Path) -> Path:
    """`<root>/acme/payments-api`: a retry helper, an unrelated file and an ADR on main, and a
    branch card/PAY-1."""
    repo = root / "acme" / "payments-api"
    (repo / "app" / "webhooks").mkdir(parents=True)
    (repo / "docs" / "adr").mkdir(parents=True)
    (repo / "app" / "webhooks" / "retry.py").write_text(
        "def next_delay(attempt: int, base: float, cap: float) -> float:\n"
        "    delay = base * 2 ** attempt\n    return min(delay, cap)\n")
    (repo / "app" / "unrelated.py").write_text("def greet() -> str:\n    return 'hello'\n")
    (repo / "docs" / "adr" / "0007-webhook-retries.md").write_text("# ADR 7: retry webhooks with capped backoff\n")
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", "initial"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "branch", "card/PAY-1"], check=True)
    return repo


def commit_files(repo: Path, files: dict[str, str], message: str = "initial") -> None:
    """A new repository at `repo` (created) holding `files` in one commit on main."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True, capture_output=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True, capture_output=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", message], check=True, capture_output=True)
