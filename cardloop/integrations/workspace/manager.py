"""One workspace per card: a git worktree of the card's repository on the card's branch.

    <root>/clones/<owner>/<name>          the cached clone (RepositorySource's cache, shallow)
    <root>/worktrees/<slug>-<hash>/       the card's worktree, on `card.branch` or cardloop/<card id>
    <root>/worktrees/<slug>-<hash>.home/  HOME for the card's commands (never the worker's own)
    <root>/worktrees/<slug>-<hash>.json   which card, repository and branch; when last used

`open` creates the worktree from the remote branch when it exists (another worker's checkpoint,
or a branch a person pushed), else from the default branch; a worktree that is already there
and sane is reopened as it is, uncommitted changes included. `checkpoint` commits everything
and pushes it to the card's branch: nothing changed and nothing unpushed means no commit and
no push, so a retried checkpoint is harmless; a push the remote refuses raises PushRejected
with git's (scrubbed) message. `remove` deletes a card's workspace when the card is done;
`cleanup` removes the rest by age, then the least recently used until the total fits the size
limit. What was never checkpointed is lost with a removed workspace: checkpoint first.

The worker's git in a worktree runs `at` its GitDirs: the gitdir `<clone>/.git/worktrees/<name>`
that `worktree add` made for the path, computed here and never read from the worktree's `.git`
file; the clone's config is restored before each command (sources/repository/git.py), and the
push and fetches name the worker's URL, not `origin`. `git_env` gives the git tools the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from cardloop.integrations.sources.repository import RepositorySource
from cardloop.integrations.sources.repository.git import _MISSING_BRANCH, GitDirs, restore
from cardloop.integrations.workspace.branches import (
    checkpoint_owner,
    default_branch_name,
    legacy_branch_name,
)
from cardloop.integrations.workspace.errors import PushRejected, WorkspaceError
from cardloop.integrations.workspace.git import Git, GitFailed
from cardloop.integrations.workspace.sandbox import WorkspaceView
from cardloop.prompts.card import Card

AUTHOR_NAME = "cardloop agent"
AUTHOR_EMAIL = "agent@cardloop.invalid"
# git's words for a push the remote refused (as opposed to one that never reached it).
_REJECTED = re.compile(
    r"\[rejected\]|\[remote rejected\]|pre-receive hook declined|hook declined|protected branch|"
    r"non-fast-forward|failed to push some refs|denied|permission to .* denied",
    re.IGNORECASE,
)


def card_key(card: Card) -> str:
    return f"{card.tenant}/{card.board}/{card.id}"


@dataclass(frozen=True)
class Workspace:
    card_key: str
    repo: str
    branch: str
    path: Path
    home: Path
    created_from: str  # "origin/<branch>", "default branch <sha>" or "existing worktree"


@dataclass(frozen=True)
class Checkpoint:
    sha: str
    committed: bool               # a new commit was made
    pushed: bool                  # the branch was pushed (the commit, or an earlier unpushed one)
    files: tuple[str, ...] = ()   # what the new commit changed


class WorkspaceManager:
    def __init__(
        self,
        root: str | Path,
        *,
        clone_url_template: str = "https://github.com/{repo}.git",
        token: object | None = None,
        depth: int = 50,
        git_timeout: float = 120.0,
    ) -> None:
        self.root = Path(root).expanduser()
        self.depth = depth
        # Only the source's git plumbing is used: `counter=len` keeps it from loading a vocabulary.
        source = RepositorySource(self.root / "clones", clone_url_template=clone_url_template,
                                  token=token, depth=depth, git_timeout=git_timeout, counter=len)  # type: ignore[arg-type]
        self.git = Git(source)

    def __repr__(self) -> str:
        return f"WorkspaceManager(root={str(self.root)!r})"

    # --- where ---------------------------------------------------------------------------

    def _name(self, key: str, card_id: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", card_id).strip(".-")[:40] or "card"
        return f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def _paths(self, key: str, card_id: str) -> tuple[Path, Path, Path]:
        base = self.root / "worktrees" / self._name(key, card_id)
        return base, base.with_name(base.name + ".home"), base.with_name(base.name + ".json")

    def _clone_path(self, repo: str) -> Path:
        return self.git.checkouts.path(repo)

    def _dirs(self, repo: str, path: Path) -> GitDirs:
        """Where the worktree at `path` keeps its git state: `worktree add` names the gitdir
        after the path's last component, which is unique per card (see `_add_worktree`)."""
        clone = self.git.checkouts.dirs(repo)
        return GitDirs(work_tree=path, git_dir=clone.common_dir / "worktrees" / path.name,
                       common_dir=clone.common_dir, url=clone.url)

    def dirs(self, ws: Workspace) -> GitDirs:
        return self._dirs(ws.repo, ws.path)

    def run(self, ws: Workspace, args: list[str]) -> str:
        """The worker's git in the card's worktree (see the module docstring)."""
        return self.git.run(args, ws.path, at=self.dirs(ws))

    def head(self, ws: Workspace) -> str:
        return self.run(ws, ["rev-parse", "HEAD"]).strip()

    def view(self, ws: Workspace) -> WorkspaceView:
        """What the card's commands see of the worker's hidden paths: its worktree and HOME, and
        the clone's git directory, which the worktree's `.git` file points into (the agent's own
        git writes objects, refs and `packed-refs` there), with the clone's config read-only. So
        no command writes the config the worker's git reads: one writing it between the worker's
        rewrite and git's read was the race sources/repository/git.py could not close alone.
        The worker never renames over that file while commands run (it rewrites it in place, and
        `worktree add --no-track` writes no branch section): a rename would detach the read-only
        mount from a command running meanwhile and give it the new, writable file."""
        common = self.dirs(ws).common_dir
        return WorkspaceView(writable=(str(ws.path), str(ws.home), str(common)),
                             read_only=(str(common / "config"),))

    def git_env(self, ws: Workspace) -> dict[str, str]:
        """For the git tools (read-only, local): the clone's config restored, and the environment
        that makes git use the worker's gitdir and no system or global config."""
        dirs = self.dirs(ws)
        restore(dirs)
        return {**dirs.env(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}

    # --- open ----------------------------------------------------------------------------

    def open(self, card: Card) -> Workspace:
        """The card's workspace, created on first use (see the module docstring)."""
        if not card.repo:
            raise WorkspaceError(f"card {card.id} names no repository: no workspace", retryable=False)
        key = card_key(card)
        path, home, meta = self._paths(key, card.id)
        clone = self.git.clone(card.repo)
        with self.git.locked(card.repo):
            branch = self.git.check_branch(card.branch or self._default_branch(card, key, path, clone.path),
                                           card.repo)
            if self._current_branch(card.repo, path) == branch:
                created_from = "existing worktree"
            else:
                self._refuse_a_branch_in_use(key, card.repo, branch)
                created_from = self._add_worktree(card.repo, clone.path, clone.sha, path, branch)
        home.mkdir(parents=True, exist_ok=True)
        ws = Workspace(key, card.repo, branch, path, home, created_from)
        self._write_meta(meta, ws)
        return ws

    def _refuse_a_branch_in_use(self, key: str, repo: str, branch: str) -> None:
        """git keeps a branch in one worktree at a time, and two cards committing to one branch
        would refuse each other's pushes anyway: say which card holds it, in words a person can
        act on, instead of git's "cannot force update the branch ... checked out at <path>"."""
        for meta in sorted((self.root / "worktrees").glob("*.json")):
            data = self._read_meta(meta)
            if data.get("card_key") == key or data.get("repo") != repo or data.get("branch") != branch:
                continue
            if not meta.with_suffix("").is_dir():
                continue
            raise WorkspaceError(
                f"branch {branch} of {repo} is in use by card {data.get('card_key')}'s workspace on this "
                "worker: two cards cannot work one branch at once. Move that card to done (its workspace "
                "is then removed) or give this card a branch of its own (the card's `branch`), then retry.",
                retryable=False)

    def _default_branch(self, card: Card, key: str, path: Path, clone: Path) -> str:
        """default_branch_name, unless the card's own work is on its legacy name (branches.py):
        its worktree is on it, or the newest checkpoint the remote branch carries is the card's."""
        assert card.repo is not None
        name, legacy = default_branch_name(card.id), legacy_branch_name(card.id)
        if name == legacy:
            return name
        current = self._current_branch(card.repo, path)
        if current is not None and current in (name, legacy):  # the worktree's path is the card's own
            return current
        if self._remote_subjects(card.repo, clone, name) is not None:
            return name
        subjects = self._remote_subjects(card.repo, clone, legacy)
        return legacy if subjects is not None and checkpoint_owner(subjects) == key else name

    def _remote_subjects(self, repo: str, clone: Path, branch: str) -> list[str] | None:
        """The commit subjects of the remote's `branch` (newest first, as deep as a worktree's
        fetch), or None when the remote has no such branch."""
        remote_ref = f"refs/remotes/origin/{branch}"
        try:
            self.git.run(["fetch", "--depth", str(self.depth), "--no-tags", "--quiet",
                          self.git.checkouts.url(repo), f"+refs/heads/{branch}:{remote_ref}"], clone)
        except GitFailed as exc:
            if exc.timed_out or not _MISSING_BRANCH.search(exc.detail):
                raise
            return None
        return self.git.run(["log", "--format=%s", f"-{self.depth}", remote_ref], clone).splitlines()

    def _current_branch(self, repo: str, path: Path) -> str | None:
        dirs = self._dirs(repo, path)
        if not (path.is_dir() and dirs.git_dir.is_dir()):
            return None
        try:
            return self.git.run(["rev-parse", "--abbrev-ref", "HEAD"], path, at=dirs).strip()
        except WorkspaceError:
            return None  # a worktree whose clone was re-made: rebuilt from the remote

    def _add_worktree(self, repo: str, clone: Path, default_sha: str, path: Path, branch: str) -> str:
        if path.exists():
            shutil.rmtree(path)
        self.git.run(["worktree", "prune"], clone)
        # The gitdir `worktree add` makes must be the one `_dirs` names: a directory left there
        # (by a crash, or made by a command) would make git pick `<name>1`.
        gitdir = self._dirs(repo, path).git_dir
        if gitdir.is_symlink() or gitdir.is_file():
            gitdir.unlink()
        shutil.rmtree(gitdir, ignore_errors=True)
        remote_ref = f"refs/remotes/origin/{branch}"
        try:
            self.git.run(["fetch", "--depth", str(self.depth), "--no-tags", "--quiet",
                          self.git.checkouts.url(repo), f"+refs/heads/{branch}:{remote_ref}"], clone)
            start, created_from = remote_ref, f"origin/{branch}"
        except GitFailed as exc:
            if exc.timed_out or not _MISSING_BRANCH.search(exc.detail):
                raise
            # No such branch on the remote (yet): a stale tracking ref would make checkpoint
            # believe the default branch's commit was already pushed there.
            with contextlib.suppress(WorkspaceError):
                self.git.run(["update-ref", "-d", remote_ref], clone)
            start, created_from = default_sha, f"default branch {default_sha[:12]}"
        path.parent.mkdir(parents=True, exist_ok=True)
        # --no-track: a tracking section would be written into the clone's config by a rename
        # (see `view`); the worker names the remote and the ref on every fetch and push anyway.
        self.git.run(["worktree", "add", "--force", "--quiet", "--no-track", "-B", branch, str(path), start], clone)
        if not gitdir.is_dir():
            raise WorkspaceError(f"git worktree add made no gitdir at {gitdir.name} for {path.name}", retryable=True)
        return created_from

    # --- checkpoint ----------------------------------------------------------------------

    def checkpoint(self, ws: Workspace, *, run: str, turn: int) -> Checkpoint:
        """Commit every change and push the branch; see the module docstring."""
        changed = self.changed_files(ws)
        committed = False
        if changed:
            self.run(ws, ["add", "-A"])
            message = (f"cardloop: {ws.card_key} run {run} turn {turn}\n\n"
                       f"Checkpoint of the card's workspace after turn {turn} of run {run}.\n")
            self.run(ws, ["-c", f"user.name={AUTHOR_NAME}", "-c", f"user.email={AUTHOR_EMAIL}",
                          "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message])
            committed = True
        head = self.head(ws)
        remote_ref = f"refs/remotes/origin/{ws.branch}"
        try:
            pushed_sha = self.run(ws, ["rev-parse", "--verify", "--quiet", remote_ref]).strip()
        except GitFailed:
            pushed_sha = ""
        pushed = False
        if head != pushed_sha:
            try:
                # To the URL the worker knows: nothing in config can say where `origin` is.
                self.run(ws, ["push", "--quiet", self.dirs(ws).url, f"HEAD:refs/heads/{ws.branch}"])
            except GitFailed as exc:
                if not exc.timed_out and _REJECTED.search(exc.detail):
                    raise PushRejected(ws.branch, exc.detail) from None
                raise
            self.run(ws, ["update-ref", remote_ref, head])
            pushed = True
        self._touch(ws)
        return Checkpoint(head, committed, pushed, tuple(changed) if committed else ())

    def changed_files(self, ws: Workspace) -> list[str]:
        """Paths with changes not yet committed (untracked included, ignored files not)."""
        out = self.run(ws, ["status", "--porcelain", "-z", "--untracked-files=all"])
        files: list[str] = []
        entries = out.split("\0")
        i = 0
        while i < len(entries):
            entry = entries[i]
            if len(entry) > 3:
                files.append(entry[3:])
                if entry[0] in "RC":
                    i += 1  # a rename's source path follows
            i += 1
        return files

    # --- removal -------------------------------------------------------------------------

    def remove(self, card: Card) -> bool:
        """Delete the card's workspace (its card is done). False when there was none."""
        key = card_key(card)
        path, home, meta = self._paths(key, card.id)
        return self._remove(path, home, meta, card.repo)

    def _remove(self, path: Path, home: Path, meta: Path, repo: str | None) -> bool:
        existed = path.exists() or meta.exists()
        info = self._read_meta(meta)
        repo = repo or info.get("repo")
        branch = info.get("branch")
        clone = self._clone_path(repo) if repo else None
        if clone is not None and (clone / ".git").is_dir():
            with self.git.locked(repo):  # type: ignore[arg-type]
                with contextlib.suppress(WorkspaceError):
                    self.git.run(["worktree", "remove", "--force", "--force", str(path)], clone)
                shutil.rmtree(path, ignore_errors=True)
                with contextlib.suppress(WorkspaceError):
                    self.git.run(["worktree", "prune"], clone)
                if branch:
                    for args in (["branch", "-D", "--quiet", branch],
                                 ["update-ref", "-d", f"refs/remotes/origin/{branch}"]):
                        with contextlib.suppress(WorkspaceError):
                            self.git.run(args, clone)
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        meta.unlink(missing_ok=True)
        return existed

    def cleanup(self, *, max_bytes: int, max_age_seconds: float, keep: Collection[str] = (),
                now: float | None = None) -> list[str]:
        """Remove workspaces unused for longer than `max_age_seconds`, then the least recently
        used until all of them together fit `max_bytes`. `keep` names card keys in use.
        Returns the card keys removed."""
        now = time.time() if now is None else now
        entries = []
        for meta in sorted((self.root / "worktrees").glob("*.json")):
            info = self._read_meta(meta)
            base = meta.with_suffix("")
            entries.append((float(info.get("last_used", 0.0)), str(info.get("card_key", base.name)), base, meta))
        removed: list[str] = []
        left = []
        for last_used, key, base, meta in sorted(entries):
            if key not in keep and now - last_used > max_age_seconds:
                self._remove(base, base.with_name(base.name + ".home"), meta, None)
                removed.append(key)
            else:
                left.append((last_used, key, base, meta))
        sizes = {base: _size(base) + _size(base.with_name(base.name + ".home")) for _, _, base, _ in left}
        total = sum(sizes.values())
        for _last_used, key, base, meta in left:  # oldest first
            if total <= max_bytes:
                break
            if key in keep:
                continue
            self._remove(base, base.with_name(base.name + ".home"), meta, None)
            total -= sizes[base]
            removed.append(key)
        return removed

    def remove_done(self, is_done: Callable[[str], bool]) -> list[str]:
        """Remove the workspaces whose card `is_done` says is done; the card keys removed."""
        removed = []
        for meta in sorted((self.root / "worktrees").glob("*.json")):
            key = self._read_meta(meta).get("card_key")
            if isinstance(key, str) and is_done(key):
                base = meta.with_suffix("")
                self._remove(base, base.with_name(base.name + ".home"), meta, None)
                removed.append(key)
        return removed

    # --- metadata ------------------------------------------------------------------------

    def _write_meta(self, meta: Path, ws: Workspace) -> None:
        data = {"card_key": ws.card_key, "repo": ws.repo, "branch": ws.branch, "path": str(ws.path),
                "last_used": time.time()}
        tmp = meta.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, meta)

    def _touch(self, ws: Workspace) -> None:
        self._write_meta(ws.path.with_name(ws.path.name + ".json"), ws)

    @staticmethod
    def _read_meta(meta: Path) -> dict[str, object]:
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def sweep(root: str | Path, is_done: Callable[[str], bool], *, max_bytes: int, max_age_seconds: float,
          keep: Collection[str] = (), clone_url_template: str = "https://github.com/{repo}.git") -> list[str]:
    """Every workspace under `root` (and under its per-tenant folders, root/.tenants/<tenant>):
    remove those of done cards, then apply the age and size limits. Local git only: no token.
    `clone_url_template` is the one the clones were made with: the clone's config is rewritten
    with it before each git command, as by the manager that made them."""
    base = Path(root).expanduser()
    tenants = base / ".tenants"
    roots = [base, *(sorted(p for p in tenants.iterdir() if p.is_dir()) if tenants.is_dir() else [])]
    removed: list[str] = []
    for folder in roots:
        if not (folder / "worktrees").is_dir():
            continue
        manager = WorkspaceManager(folder, clone_url_template=clone_url_template)
        removed += manager.remove_done(is_done)
        removed += manager.cleanup(max_bytes=max_bytes, max_age_seconds=max_age_seconds, keep=keep)
    return removed
