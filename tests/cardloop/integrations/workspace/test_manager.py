"""WorkspaceManager against a bare repository on disk: worktrees per card, checkpoints pushed
once, a refused push reported, removal and cleanup."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cardloop.integrations.workspace.errors import PushRejected, WorkspaceError
from cardloop.integrations.workspace.manager import WorkspaceManager, default_branch_name
from tests.cardloop.integrations.workspace.conftest import make_card
from tests.sample_remote import Remote

FIX = "            capped = min(raw, self.max_delay)\n"


def test_a_new_branch_starts_from_the_default_branch(manager: WorkspaceManager, remote: Remote) -> None:
    ws = manager.open(make_card())
    assert ws.branch == "cardloop/PAY-142"
    assert ws.created_from.startswith("default branch ")
    assert (ws.path / "app" / "webhooks" / "retry.py").is_file()
    assert remote.head("cardloop/PAY-142") is None  # nothing pushed until a checkpoint


def test_an_existing_remote_branch_is_checked_out(manager: WorkspaceManager, remote: Remote) -> None:
    ws = manager.open(make_card(branch="card/PAY-142-webhook-retries"))
    assert ws.created_from == "origin/card/PAY-142-webhook-retries"
    assert (ws.path / "NOTES.md").read_text() == "work on card/PAY-142-webhook-retries\n"


def test_reopening_keeps_uncommitted_changes(manager: WorkspaceManager) -> None:
    ws = manager.open(make_card())
    (ws.path / "scratch.txt").write_text("half done\n")
    again = manager.open(make_card())
    assert again.path == ws.path and again.created_from == "existing worktree"
    assert (again.path / "scratch.txt").read_text() == "half done\n"


def test_two_cards_get_two_worktrees_of_one_clone(manager: WorkspaceManager) -> None:
    a = manager.open(make_card("PAY-1"))
    b = manager.open(make_card("PAY-2"))
    assert a.path != b.path and {a.branch, b.branch} == {"cardloop/PAY-1", "cardloop/PAY-2"}
    assert len(list((manager.root / "clones").glob("*/*/.git"))) == 1


def test_checkpoint_commits_and_pushes_once(manager: WorkspaceManager, remote: Remote) -> None:
    ws = manager.open(make_card())
    retry = ws.path / "app" / "webhooks" / "retry.py"
    retry.write_text(retry.read_text().replace("        return raw\n", "        return min(raw, self.max_delay)\n"))
    first = manager.checkpoint(ws, run="r1", turn=3)
    assert first.committed and first.pushed and first.files == ("app/webhooks/retry.py",)
    assert remote.head(ws.branch) == first.sha
    assert remote.commits(ws.branch)[0] == "cardloop: acme/github-projects/PAY-142 run r1 turn 3"
    author = subprocess.run(["git", "log", "-1", "--format=%an <%ae>", first.sha], cwd=remote.bare,
                            capture_output=True, text=True, check=True).stdout.strip()
    assert author == "cardloop agent <agent@cardloop.invalid>"
    assert "min(raw, self.max_delay)" in remote.show(ws.branch, "app/webhooks/retry.py")
    # Retried (or nothing changed): no new commit, no push.
    again = manager.checkpoint(ws, run="r1", turn=3)
    assert (again.committed, again.pushed, again.sha) == (False, False, first.sha)
    assert len(remote.commits(ws.branch)) == 2


def test_a_checkpoint_left_unpushed_is_pushed_by_the_retry(manager: WorkspaceManager, remote: Remote) -> None:
    ws = manager.open(make_card())
    (ws.path / "new.txt").write_text("x\n")
    remote.reject_pushes("temporarily closed")
    with pytest.raises(PushRejected):
        manager.checkpoint(ws, run="r1", turn=1)
    (remote.bare / "hooks" / "pre-receive").unlink()
    retried = manager.checkpoint(ws, run="r1", turn=1)
    assert (retried.committed, retried.pushed) == (False, True)
    assert remote.head(ws.branch) == retried.sha


def test_a_refused_push_is_a_non_retryable_error_with_gits_message(
    manager: WorkspaceManager, remote: Remote
) -> None:
    ws = manager.open(make_card())
    (ws.path / "new.txt").write_text("x\n")
    remote.reject_pushes("branch cardloop/PAY-142 is protected")
    with pytest.raises(PushRejected) as info:
        manager.checkpoint(ws, run="r1", turn=1)
    assert info.value.retryable is False
    assert "branch cardloop/PAY-142 is protected" in str(info.value)
    assert "pre-receive hook declined" in info.value.detail


def test_the_token_never_reaches_the_remote_url_or_an_error(tmp_path: Path, remote: Remote) -> None:
    token = "ghs_WorkspaceT0ken0123456789abcdefXYZ"
    manager = WorkspaceManager(tmp_path / "ws2", clone_url_template="http://127.0.0.1:9/{repo}.git", token=token)
    with pytest.raises(WorkspaceError) as info:
        manager.open(make_card())
    assert token not in str(info.value)
    config = (manager.root / "clones" / "acme" / "payments-api" / ".git" / "config")
    assert not config.exists() or token not in config.read_text()


def test_another_worker_continues_from_the_pushed_checkpoint(tmp_path: Path, remote: Remote) -> None:
    first = WorkspaceManager(tmp_path / "worker-a", clone_url_template=remote.url_template)
    ws = first.open(make_card())
    (ws.path / "progress.txt").write_text("turn 1\n")
    done = first.checkpoint(ws, run="r1", turn=1)
    second = WorkspaceManager(tmp_path / "worker-b", clone_url_template=remote.url_template)
    ws_b = second.open(make_card())
    assert ws_b.created_from == f"origin/{ws.branch}"
    assert (ws_b.path / "progress.txt").read_text() == "turn 1\n"
    nothing = second.checkpoint(ws_b, run="r1", turn=2)
    assert (nothing.committed, nothing.pushed, nothing.sha) == (False, False, done.sha)


def test_a_broken_worktree_is_rebuilt_from_the_remote(manager: WorkspaceManager, remote: Remote) -> None:
    ws = manager.open(make_card())
    (ws.path / "kept.txt").write_text("pushed\n")
    manager.checkpoint(ws, run="r1", turn=1)
    shutil.rmtree(manager.dirs(ws).git_dir)  # its clone was re-made, say: the worktree's gitdir is gone
    again = manager.open(make_card())
    assert again.created_from == f"origin/{ws.branch}"
    assert (again.path / "kept.txt").read_text() == "pushed\n"


def test_remove_deletes_the_worktree_branch_and_home(manager: WorkspaceManager) -> None:
    card = make_card()
    ws = manager.open(card)
    assert manager.remove(card) is True
    assert not ws.path.exists() and not ws.home.exists()
    clone = manager.root / "clones" / "acme" / "payments-api"
    branches = subprocess.run(["git", "branch", "--list"], cwd=clone, capture_output=True, text=True).stdout
    assert ws.branch not in branches
    assert manager.remove(card) is False
    assert manager.open(card).created_from.startswith("default branch ")  # usable again


def test_cleanup_by_age_then_by_size(manager: WorkspaceManager) -> None:
    old, mid, new = (manager.open(make_card(f"PAY-{n}")) for n in (1, 2, 3))
    for ws, age in ((old, 10_000.0), (mid, 500.0), (new, 100.0)):
        meta = ws.path.with_name(ws.path.name + ".json")
        data = json.loads(meta.read_text())
        data["last_used"] = 1_000_000.0 - age
        meta.write_text(json.dumps(data))
    (mid.path / "big.bin").write_bytes(b"\0" * 300_000)
    removed = manager.cleanup(max_bytes=10**9, max_age_seconds=3600, now=1_000_000.0)
    assert removed == [old.card_key] and not old.path.exists()
    removed = manager.cleanup(max_bytes=200_000, max_age_seconds=3600, keep={new.card_key}, now=1_000_000.0)
    assert removed == [mid.card_key] and not mid.path.exists() and new.path.exists()


def test_a_card_without_a_repository_has_no_workspace(manager: WorkspaceManager) -> None:
    with pytest.raises(WorkspaceError) as info:
        manager.open(make_card(repo=None))
    assert info.value.retryable is False


@pytest.mark.parametrize("branch", ["--upload-pack=evil", "a..b", "x.lock"])
def test_unsafe_branch_names_are_refused(manager: WorkspaceManager, branch: str) -> None:
    with pytest.raises(WorkspaceError) as info:
        manager.open(make_card(branch=branch))
    assert info.value.retryable is False


@pytest.mark.parametrize(("card_id", "branch"), [
    ("PAY-142", "cardloop/PAY-142"),
    ("ENG#12", "cardloop/ENG-12-"),
    ("a:b/../c", "cardloop/a-b/x/c-"),
    ("x.lock", "cardloop/x-"),
])
def test_default_branch_names_are_safe_for_git(card_id: str, branch: str) -> None:
    name = default_branch_name(card_id)
    # A name git made us change carries 8 hex digits of the id: no other id shares it.
    assert name.startswith(branch) and len(name) == len(branch) + (8 if branch.endswith("-") else 0)
    subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], check=True)


def test_two_cards_whose_ids_git_would_merge_work_on_branches_of_their_own(
        manager: WorkspaceManager, remote: Remote) -> None:
    hashed, plain = manager.open(make_card("PAY#142")), manager.open(make_card("PAY-142"))
    assert hashed.branch != plain.branch and plain.branch == "cardloop/PAY-142"
    for ws in (hashed, plain):
        (ws.path / "mine.txt").write_text(f"{ws.card_key}\n")
        manager.checkpoint(ws, run="r1", turn=1)
    assert remote.show(hashed.branch, "mine.txt") == "acme/github-projects/PAY#142\n"
    assert remote.show(plain.branch, "mine.txt") == "acme/github-projects/PAY-142\n"
    assert remote.commits(plain.branch)[0] == "cardloop: acme/github-projects/PAY-142 run r1 turn 1"


def _push_legacy_work(remote: Remote, tmp_path: Path, key: str) -> None:
    """A checkpoint of `key` on `cardloop/ENG-12`, the name cards with id ENG#12 used to get."""
    work = tmp_path / "legacy"
    subprocess.run(["git", "clone", "--quiet", str(remote.bare), str(work)], check=True)
    (work / "legacy.txt").write_text("pushed before the digest\n")
    for args in (["add", "-A"], ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-m",
                                f"cardloop: {key} run 1 turn 2"],
                 ["push", "--quiet", "origin", "HEAD:refs/heads/cardloop/ENG-12"]):
        subprocess.run(["git", *args], cwd=work, check=True)


def test_a_card_whose_work_is_on_its_old_branch_name_keeps_working_there(
        manager: WorkspaceManager, remote: Remote, tmp_path: Path) -> None:
    _push_legacy_work(remote, tmp_path, "acme/github-projects/ENG#12")
    ws = manager.open(make_card("ENG#12"))
    assert (ws.branch, ws.created_from) == ("cardloop/ENG-12", "origin/cardloop/ENG-12")
    assert (ws.path / "legacy.txt").is_file()


def test_another_cards_work_on_the_old_branch_name_is_not_taken(
        manager: WorkspaceManager, remote: Remote, tmp_path: Path) -> None:
    _push_legacy_work(remote, tmp_path, "acme/github-projects/ENG-12")
    ws = manager.open(make_card("ENG#12"))
    assert ws.branch == default_branch_name("ENG#12") != "cardloop/ENG-12"
    assert ws.created_from.startswith("default branch ") and not (ws.path / "legacy.txt").exists()


def test_a_branch_another_cards_workspace_holds_is_refused_in_words(manager: WorkspaceManager) -> None:
    first = manager.open(make_card("PAY-142", branch="card/shared"))
    with pytest.raises(WorkspaceError) as refused:
        manager.open(make_card("PAY-143", branch="card/shared"))
    assert not refused.value.retryable
    assert "in use by card acme/github-projects/PAY-142" in str(refused.value)
    assert "checked out at" not in str(refused.value)
    # Once the first card's workspace is gone, the branch is free for the second.
    assert manager.remove(make_card("PAY-142", branch="card/shared"))
    second = manager.open(make_card("PAY-143", branch="card/shared"))
    assert second.branch == first.branch == "card/shared"
