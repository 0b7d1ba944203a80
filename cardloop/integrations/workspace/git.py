"""git for workspaces, through the repository source's own runner.

The workspace reuses what the repository source already does for its cached clones, rather
than a second copy of it: `GitCheckouts.checkout` clones or updates the cache, and its
runner (`run`) gives every git call the same protections - the token reaches git only through
`GIT_CONFIG_*` environment variables (a `url.<authed>.insteadOf` rewrite, never a command-line
argument or a stored remote URL), credential helpers and the repository's hooks are off, a
timeout kills git's whole process group, and git's error output is scrubbed of the token and
of any `user:password@` in a URL before it becomes a message. `locked` is its per-repository
flock, held here while worktrees are added or removed, since those change the shared clone.
A worktree's git runs `at` the GitDirs the manager computes (its gitdir in the clone, never the
`.git` file the agent can rewrite), with the clone's config restored first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cardloop.integrations.sources.repository import Checkout, GitCheckouts, RepositorySource
from cardloop.integrations.sources.repository.git import GitDirs
from cardloop.integrations.sources.repository.git import GitFailed as _GitFailed
from cardloop.integrations.upstream import UpstreamError
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
        self.checkouts: GitCheckouts = source.checkouts

    def run(self, args: list[str], cwd: Path, *, at: GitDirs | None = None) -> str:
        try:
            return self.checkouts.run(args, cwd, at=at)
        except _GitFailed as exc:
            raise GitFailed(exc.command, exc.detail, timed_out=exc.timed_out) from None
        except UpstreamError as exc:
            raise WorkspaceError(exc.message, retryable=exc.retryable) from None

    def clone(self, repo: str) -> Checkout:
        """The cached clone of `repo`, updated to its default branch."""
        try:
            return self.source.checkout(repo, None)
        except UpstreamError as exc:
            raise WorkspaceError(exc.message, retryable=exc.retryable) from None

    @contextmanager
    def locked(self, repo: str) -> Iterator[None]:
        try:
            with self.checkouts.locked(repo):
                yield
        except UpstreamError as exc:
            raise WorkspaceError(exc.message, retryable=exc.retryable) from None

    def check_branch(self, branch: str, repo: str) -> str:
        try:
            checked = self.checkouts.check_branch(branch, repo)
        except UpstreamError as exc:
            raise WorkspaceError(exc.message, retryable=False) from None
        assert checked is not None
        return checked

    def scrub(self, text: str) -> str:
        return self.checkouts.scrub(text)
