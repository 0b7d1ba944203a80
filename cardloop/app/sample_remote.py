"""The sample repository (examples/sample-repo) pushed to a bare repository on disk: the card's
"remote" (clone URL `file://<dir>/{repo}.git`) for `cardloop demo` and the tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SAMPLE_REPO = Path(__file__).resolve().parents[2] / "examples" / "sample-repo"
SAMPLE_REPO_NAME = "acme/payments-api"
_GIT_ENV = {"GIT_AUTHOR_NAME": "sample", "GIT_AUTHOR_EMAIL": "sample@example.invalid",
            "GIT_COMMITTER_NAME": "sample", "GIT_COMMITTER_EMAIL": "sample@example.invalid",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **_GIT_ENV}).stdout


@dataclass(frozen=True)
class Remote:
    root: Path
    repo: str

    @property
    def url_template(self) -> str:
        return f"file://{self.root}/{{repo}}.git"

    @property
    def bare(self) -> Path:
        return self.root / f"{self.repo}.git"

    def head(self, branch: str) -> str | None:
        out = git("for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}", cwd=self.bare).strip()
        return out or None

    def commits(self, branch: str) -> list[str]:
        """Subjects on `branch`, newest first."""
        return git("log", "--format=%s", f"refs/heads/{branch}", cwd=self.bare).splitlines()

    def show(self, branch: str, path: str) -> str:
        return git("show", f"refs/heads/{branch}:{path}", cwd=self.bare)

    def reject_pushes(self, message: str) -> None:
        """A pre-receive hook that refuses every push with `message`."""
        hook = self.bare / "hooks" / "pre-receive"
        hook.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
        hook.chmod(0o755)


def push_sample_repo(root: Path, repo: str = SAMPLE_REPO_NAME, *, branches: tuple[str, ...] = ()) -> Remote:
    """Commit examples/sample-repo on `main` (plus `branches`, each one commit ahead) and push it
    all to a bare repository under `root`."""
    remote = Remote(root, repo)
    work = root / "_work" / repo
    shutil.copytree(SAMPLE_REPO, work, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    remote.bare.mkdir(parents=True)
    git("init", "--quiet", "--bare", "--initial-branch=main", cwd=remote.bare)
    git("init", "--quiet", "--initial-branch=main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "--quiet", "-m", "sample: retry policy with its tests", cwd=work)
    git("push", "--quiet", str(remote.bare), "main", cwd=work)
    for branch in branches:
        git("checkout", "--quiet", "-b", branch, "main", cwd=work)
        (work / "NOTES.md").write_text(f"work on {branch}\n")
        git("add", "-A", cwd=work)
        git("commit", "--quiet", "-m", f"start {branch}", cwd=work)
        git("push", "--quiet", str(remote.bare), branch, cwd=work)
    return remote
