"""The worker's own git in a worktree the agent can write: a repository's config can make git run
programs (an fsmonitor, a clean filter). Those must never see the worker's secrets, and in the
cache's checkouts the config is the worker's own before every git command, so they never run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cardloop.integrations.sources.repository import RepositorySource
from cardloop.integrations.sources.repository.git import GitCheckouts
from tests.sample_remote import SAMPLE_REPO_NAME, git, push_sample_repo

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
    leaked = seen_filter.read_text()  # a filter runs in a repository outside the cache (see below) ...
    assert SECRET not in leaked and TOKEN not in leaked  # ... but sees neither the worker's keys nor the token
    assert "PATH=" in leaked


def test_the_clone_token_goes_only_to_commands_that_reach_the_remote(tmp_path: Path) -> None:
    git = GitCheckouts(tmp_path / "cache", clone_url_template="https://github.com/{repo}.git", token=TOKEN)
    assert any(TOKEN in v for v in git.env(network=True).values())
    assert not any(TOKEN in v for v in git.env(network=False).values())


def test_a_cached_checkouts_config_is_the_workers_own_before_each_git_command(tmp_path: Path) -> None:
    # The repository source's cache lives on the same disk as the workspaces: a command can write
    # its config too. The next checkout fetches from the real remote and runs no filter.
    remote = push_sample_repo(tmp_path / "remotes")
    attacker = tmp_path / "attacker.git"
    git("init", "--quiet", "--bare", str(attacker), cwd=tmp_path)
    source = RepositorySource(tmp_path / "cache", clone_url_template=remote.url_template, counter=len)
    co = source.checkout(SAMPLE_REPO_NAME, None)
    mark = tmp_path / "program-ran"
    real = remote.url_template.format(repo=SAMPLE_REPO_NAME)
    for key, value in [("filter.x.smudge", f"touch {mark}; cat"), ("filter.x.clean", f"touch {mark}; cat"),
                       ("remote.origin.url", f"file://{attacker}"), (f"url.file://{attacker}.insteadOf", real),
                       ("core.sshCommand", f"touch {mark}")]:
        subprocess.run(["git", "config", key, value], cwd=co.path, check=True)
    (co.path / ".git" / "info" / "attributes").write_text("* filter=x\n")
    work = tmp_path / "person"
    git("clone", "--quiet", real, str(work), cwd=tmp_path)
    (work / "app" / "webhooks" / "retry.py").write_text("changed upstream\n")
    git("commit", "--quiet", "-am", "upstream change", cwd=work)
    git("push", "--quiet", "origin", "HEAD:main", cwd=work)
    again = source.checkout(SAMPLE_REPO_NAME, None)
    assert again.sha == remote.head("main")
    assert (again.path / "app" / "webhooks" / "retry.py").read_text() == "changed upstream\n"
    assert not mark.exists()
    config = (again.path / ".git" / "config").read_text()
    assert "filter" not in config and str(attacker) not in config and f"url = \"{real}\"" in config


def test_the_workers_git_reads_no_system_or_global_config(tmp_path: Path) -> None:
    env = GitCheckouts(tmp_path / "cache").env(network=False)
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == os.devnull
