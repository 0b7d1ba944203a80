"""What a sandboxed command sees of the worker's files, where a mount namespace can be made.

A command runs as the worker's user, so without a view of its own it could read every other
card's worktree and every tenant's clone on the worker, the store's SQLite file and the dev
stack's data dir, and write the clone's git config that the worker's own git reads. With the
view (`WorkspaceManager.view`, `SandboxLimits.hide`) it sees its worktree, its HOME and the
clone's git directory (read-only but for objects, refs, reflogs and its own gitdir), and the
hidden paths as empty."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from cardloop.contracts.config import Config
from cardloop.integrations.workspace import Sandbox, SandboxLimits, detect_protections, hidden_paths
from cardloop.integrations.workspace.manager import Workspace, WorkspaceManager
from cardloop.integrations.workspace.tools import Toolbox, ToolContext, ToolResult
from tests.cardloop.integrations.workspace.conftest import make_card
from tests.sample_remote import Remote

pytestmark = pytest.mark.skipif(not detect_protections().mount_prefix,
                                reason="no mount namespace here: " + detect_protections().why_no_mounts)

RETRY = "app/webhooks/retry.py"


@pytest.fixture
def hidden(tmp_path: Path) -> tuple[str, ...]:
    """The worker's own files beside the workspaces: another tenant's root and a store."""
    other = tmp_path / "ws-other-tenant" / "worktrees" / "BILL-1"
    other.mkdir(parents=True)
    (other / "secret.py").write_text("OTHER_TENANT = 'their code'\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "cardloop.sqlite").write_text("every card's history")
    return (str(tmp_path / "ws"), str(tmp_path / "ws-other-tenant"), str(data / "cardloop.sqlite"))


def run(manager: WorkspaceManager, ws: Workspace, hide: tuple[str, ...], command: str) -> ToolResult:
    """`command` as run_command runs it in a stage: in the sandbox, with the workspace's view."""
    sandbox = Sandbox(SandboxLimits(timeout=60, hide=hide))
    box = Toolbox(ToolContext(ws.path, ws.home, sandbox, git_env=lambda: manager.git_env(ws),
                              view=manager.view(ws)), ("run_command",))
    return box.execute("run_command", {"command": command})


def test_a_command_reads_no_other_cards_worktree_no_other_tenant_and_no_store(
    manager: WorkspaceManager, hidden: tuple[str, ...], tmp_path: Path
) -> None:
    mine, theirs = manager.open(make_card("PAY-142")), manager.open(make_card("PAY-7"))
    (theirs.path / "notes.txt").write_text("PAY-7 is private\n")
    for target in (theirs.path / "notes.txt", tmp_path / "ws-other-tenant/worktrees/BILL-1/secret.py",
                   tmp_path / "data/cardloop.sqlite"):
        result = run(manager, mine, hidden, f"cat {target}")
        # A hidden directory is an empty tmpfs (no such file); a hidden file reads as /dev/null.
        assert "private" not in result.text and "their code" not in result.text and "history" not in result.text
    listing = run(manager, mine, hidden, f"ls {manager.root / 'worktrees'}").text
    assert mine.path.name in listing and theirs.path.name not in listing
    # Without the view (a platform with no mount namespace) the same command reads it: what the
    # view is for.
    bare = Toolbox(ToolContext(mine.path, mine.home, Sandbox(SandboxLimits(timeout=60))), ("run_command",))
    assert "PAY-7 is private" in bare.execute("run_command", {"command": f"cat {theirs.path / 'notes.txt'}"}).text


def test_the_card_works_as_before_in_its_own_worktree_and_home(
    manager: WorkspaceManager, remote: Remote, hidden: tuple[str, ...]
) -> None:
    ws = manager.open(make_card())
    result = run(manager, ws, hidden,
                 "echo 'x = 1' > new_module.py && git config --global user.name Agent && "
                 "git config --global user.email agent@example.invalid && git add -A && "
                 "git commit -q -m 'mine' && git checkout -q -b scratch && git checkout -q - && "
                 "git branch -D -q scratch && git log -1 --format=%s && git status --short && "
                 "mkdir -p $HOME/.cache && echo kept > $HOME/.cache/x && python -c 'print(6*7)'")
    assert not result.is_error, result.text
    assert "mine" in result.text and "42" in result.text
    assert (ws.home / ".cache" / "x").read_text() == "kept\n"
    done = manager.checkpoint(ws, run="r1", turn=1)
    assert done.pushed and remote.head(ws.branch) == done.sha
    log = manager.run(ws, ["log", "-2", "--format=%s"])
    assert "mine" in log


def test_the_clones_git_config_cannot_be_written_by_a_command(
    manager: WorkspaceManager, hidden: tuple[str, ...]
) -> None:
    ws = manager.open(make_card())
    config = manager.dirs(ws).common_dir / "config"
    before = config.read_text()
    for command in ("git config filter.x.clean 'touch /tmp/ran; cat'",
                    f"echo '[include]\n\tpath = /tmp/evil' >> {config}",
                    f"cp {config} c && echo '[core]\n\tsshCommand = touch /tmp/ran' >> c && mv c {config}",
                    f"rm -f {config}"):
        result = run(manager, ws, hidden, command)
        assert result.is_error, (command, result.text)
    assert config.read_text() == before


def test_a_looping_writer_never_wins_against_the_workers_git(
    manager: WorkspaceManager, remote: Remote, hidden: tuple[str, ...], tmp_path: Path
) -> None:
    """The race the config rewrite alone could not close: a command writing a filter into the
    clone's config in a loop while checkpoints run (it won 25 of 30 without the view). The
    worker's own config writes happen meanwhile too (another card opening on the same clone, a
    restore): they must not hand the running command a writable config."""
    ws = manager.open(make_card())
    mark = tmp_path / "filter-ran"
    common = manager.dirs(ws).common_dir
    stop_at = time.monotonic() + 8
    writer_result: list[ToolResult] = []
    loop = (f"printf '*.py filter=x\\n' > .gitattributes; end=$(( $(date +%s) + 6 )); "
            f"while [ $(date +%s) -lt $end ]; do "
            f"git config filter.x.clean 'touch {mark}; cat' 2>/dev/null && echo WROTE; "
            f"printf '[filter \"x\"]\\n\\tclean = touch {mark}; cat\\n' >> {common / 'config'} 2>/dev/null "
            f"&& echo WROTE; "
            f"done; echo done")
    writer = threading.Thread(target=lambda: writer_result.append(run(manager, ws, hidden, loop)))
    writer.start()
    turns = 0
    while time.monotonic() < stop_at and writer.is_alive():
        # Another card of the same repository opening meanwhile (`worktree add` on the shared
        # clone), and a key the rewrite drops, so the checkpoint's git rewrites the config: by a
        # rename that rewrite would detach the command's read-only mount.
        manager.open(make_card(f"PAY-{900 + turns}"))
        with open(common / "config", "a") as f:
            f.write("[gc]\n\tauto = 0\n")
        f = ws.path / RETRY
        f.write_text(f.read_text() + f"# turn {turns}\n")
        done = manager.checkpoint(ws, run="r1", turn=turns)
        assert done.pushed
        turns += 1
    writer.join()
    assert turns >= 3
    assert "done" in writer_result[0].text
    assert "WROTE" not in writer_result[0].text  # not once, not even between two rewrites
    assert not mark.exists()
    assert "filter" not in (common / "config").read_text()


def test_hidden_paths_name_the_workspaces_the_data_dir_and_a_sqlite_store(tmp_path: Path) -> None:
    root, data, cache = tmp_path / "workspaces", tmp_path / "data", tmp_path / "repos"
    for d in (root, data, cache):
        d.mkdir()
    db = tmp_path / "elsewhere" / "store.sqlite"
    db.parent.mkdir()
    db.write_text("")
    (tmp_path / "elsewhere" / "store.sqlite-wal").write_text("")
    config = Config.model_validate({"workspace": {"root": str(root), "sandbox": {"hide_paths": [str(tmp_path / "x")]}},
                                    "sources": {"repository": {"cache_dir": str(cache)}},
                                    "dev": {"data_dir": str(data)}, "store": {"url": f"sqlite:///{db}"}})
    found = hidden_paths(config)
    # What does not exist yet is named too: the sandbox is built once, the paths may come later.
    assert found == (str(root), str(cache), str(data), str(db), str(db) + "-wal", str(db) + "-shm",
                     str(db) + "-journal", str(tmp_path / "x"))
    # Never the directory the interpreter lives in: the commands run it.
    import sys
    venv_root = Path(sys.prefix).resolve().parent
    config = Config.model_validate({"workspace": {"root": str(venv_root)}, "dev": {"data_dir": str(data)},
                                    "store": {"url": f"sqlite:///{db}"}})
    assert str(venv_root) not in hidden_paths(config)



def test_another_process_of_the_workers_user_is_no_way_around_the_view(
    manager: WorkspaceManager, hidden: tuple[str, ...], tmp_path: Path
) -> None:
    """Through the host's /proc, /proc/<pid>/root of any process of the same user (another card's
    command, the dev stack's Temporal server) is the host's whole filesystem: the view brings a
    /proc of the command's own PID namespace."""
    ws = manager.open(make_card())
    secret = tmp_path / "ws-other-tenant/worktrees/BILL-1/secret.py"
    neighbour = subprocess.Popen(["sleep", "60"])
    try:
        result = run(manager, ws, hidden, f"cat /proc/{neighbour.pid}/root{secret}; ls /proc")
    finally:
        neighbour.kill()
        neighbour.wait()
    assert "their code" not in result.text
    assert str(neighbour.pid) not in result.text.split()


def test_a_hidden_path_made_after_the_sandbox_was_built_is_hidden_too(
    manager: WorkspaceManager, hidden: tuple[str, ...], tmp_path: Path
) -> None:
    later = tmp_path / "repos-cache"  # not there when the worker built its sandbox
    sandbox = Sandbox(SandboxLimits(timeout=60, hide=(*hidden, str(later))))
    ws = manager.open(make_card())
    (later / "acme" / "billing").mkdir(parents=True)
    (later / "acme" / "billing" / "app.py").write_text("BILLING = 'their code'\n")
    done = sandbox.run(f"cat {later}/acme/billing/app.py", ws.path, ws.home, view=manager.view(ws))
    assert "their code" not in done.output and done.exit_code != 0
