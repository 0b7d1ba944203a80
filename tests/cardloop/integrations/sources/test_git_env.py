"""The worker's own git in a worktree the agent can write: a repository's config can make git run
programs (an fsmonitor, a clean filter). Those must never see the worker's secrets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cardloop.integrations.sources.repository.git import GitCheckouts

SECRET = "sk-ant-api03-worker-secret-must-not-leak"
TOKEN = "ghp_cloneTokenMustNotLeak0123456789abcdef"


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("a\n")
    return path


def test_programs_a_repository_config_names_get_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://app:{SECRET}@db/cardloop")
    repo = _repo(tmp_path / "wt")
    seen_fsmonitor, seen_filter = tmp_path / "fsmonitor.env", tmp_path / "filter.env"
    # What a command in the sandbox could write into the worktree's .git/config and .gitattributes.
    subprocess.run(["git", "config", "core.fsmonitor", f"env > {seen_fsmonitor}; false"], cwd=repo, check=True)
    subprocess.run(["git", "config", "filter.leak.clean", f"env > {seen_filter}; cat"], cwd=repo, check=True)
    (repo / ".gitattributes").write_text("* filter=leak\n")
    git = GitCheckouts(tmp_path / "cache", clone_url_template="https://github.com/{repo}.git", token=TOKEN)
    git.run(["status", "--porcelain"], repo)
    git.run(["add", "-A"], repo)
    assert not seen_fsmonitor.exists()  # core.fsmonitor is off for the worker's git
    leaked = seen_filter.read_text()  # a filter still runs (a sandbox with its own mounts would stop it) ...
    assert SECRET not in leaked and TOKEN not in leaked  # ... but sees neither the worker's keys nor the token
    assert "PATH=" in leaked


def test_the_clone_token_goes_only_to_commands_that_reach_the_remote(tmp_path: Path) -> None:
    git = GitCheckouts(tmp_path / "cache", clone_url_template="https://github.com/{repo}.git", token=TOKEN)
    assert any(TOKEN in v for v in git.env(network=True).values())
    assert not any(TOKEN in v for v in git.env(network=False).values())
