"""git for workspaces, through the repository source's own runner.

The workspace reuses what `sources/repository.py` already does for its cached clones, rather
than a second copy of it: `RepositorySource.checkout` clones or updates the cache, and its
runner (`_run`) gives every git call the same protections - the token reaches git only through
`GIT_CONFIG_*` environment variables (a `url.<authed>.insteadOf` rewrite, never a command-line
argument or a stored remote URL), credential helpers and the repository's hooks are off, a
timeout kills git's whole process group, and git's error output is scrubbed of the token and
of any `user:password@` in a URL before it becomes a message. `_locked` is its per-repository
flock, held here while worktrees are added or removed, since those change the shared clone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cardloop.integrations.sources.base import SourceUnavailable
from cardloop.integrations.sources.repository import Checkout, RepositorySource, _GitFailed
from cardloop.integrations.workspace.errors import WorkspaceError


class GitFailed(WorkspaceError):
    """One git command failed; `detail` is its (scrubbed) stderr, `command` the subcommand."""

    def __init__(self, command: str, detail: str, *, timed_out: bool = False) -> None:
        super().__init__(f"git {command} failed: {detail}", retryable=True)
        self.command = command
        self.detail = detail
        self.timed_out = timed_out


class Git:
    def __init__(self, source: RepositorySource) -> None:
        self.source = source

    def run(self, args: list[str], cwd: Path) -> str:
        try:
            return self.source._run(args, cwd)
        except _GitFailed as exc:
            raise GitFailed(exc.command, exc.detail, timed_out=exc.timed_out) from None
        except SourceUnavailable as exc:
            raise WorkspaceError(exc.reason, retryable=exc.retryable) from None

    def clone(self, repo: str) -> Checkout:
        """The cached clone of `repo`, updated to its default branch."""
        try:
            return self.source.checkout(repo, None)
        except SourceUnavailable as exc:
            raise WorkspaceError(exc.reason, retryable=exc.retryable) from None

    @contextmanager
    def locked(self, repo: str) -> Iterator[None]:
        try:
            owner, name = self.source._split_repo(repo)
            with self.source._locked(owner, name):
                yield
        except SourceUnavailable as exc:
            raise WorkspaceError(exc.reason, retryable=exc.retryable) from None

    def check_branch(self, branch: str, repo: str) -> str:
        try:
            checked = self.source._check_branch(branch, repo)
        except SourceUnavailable as exc:
            raise WorkspaceError(exc.reason, retryable=False) from None
        assert checked is not None
        return checked

    def scrub(self, text: str) -> str:
        return self.source._scrub(text)
