"""Shallow checkouts of card repositories, cached on the worker, and running git safely.

Layout: the checkout of `owner/name` is `<cache_dir>/<owner>/<name>`; its lock is
`<cache_dir>/.locks/<owner>/<name>.lock`. Owner and name never start with a dot, so the two
trees never meet, and distinct repositories never share a path (`acme/api` and `acme/api.lock`
each get their own checkout and lock). The first call clones (`git clone --depth N --branch
B`), later calls fetch the branch and force-check-out `FETCH_HEAD`. One checkout serves every
branch of a repository, so everything that reads the working tree runs under an exclusive
`flock` on its lock: two activities on one worker, or two worker processes sharing a volume,
never see a tree that another is switching underneath them.

Secrets: a token is never on a command line (other users can read `ps`), never in the clone's
`.git/config` and never in an error: git receives it through `GIT_CONFIG_*` environment
variables as a `url.<https://x-access-token:TOKEN@host/>.insteadOf <https://host/>` rewrite, a
credential helper configured on the worker is switched off (it could store the token), and
git's output is scrubbed of the token before it becomes an error message.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlsplit

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.upstream import UpstreamError

DEFAULT_CLONE_URL_TEMPLATE = "https://github.com/{repo}.git"
LOCKS = ".locks"  # under cache_dir; no owner name starts with a dot
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
SAFE_BRANCH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+@-]*\Z")
_SHORT_SHA = 12


@dataclass(frozen=True)
class Checkout:
    repo: str
    branch: str | None
    path: Path
    sha: str
    committed_at: datetime | None

    @property
    def short(self) -> str:
        return self.sha[:_SHORT_SHA]


class GitFailed(Exception):
    def __init__(self, command: str, detail: str, *, timed_out: bool = False) -> None:
        super().__init__(f"git {command}: {detail}")
        self.command = command
        self.detail = detail
        self.timed_out = timed_out


_MISSING_BRANCH = re.compile(
    r"Remote branch .* not found|couldn't find remote ref|could not find remote branch", re.IGNORECASE
)
_PERMANENT = re.compile(
    r"repository '?.*'? not found|returned error: (?:400|401|403|404|410|422)|authentication failed|"
    r"could not read (?:username|password)|terminal prompts disabled|does not appear to be a git repository|"
    r"invalid username or password|permission denied|not a valid repository name|"
    r"protocol '?[\w+-]*'? is not supported|unable to find remote helper|access denied",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"could not resolve host|failed to connect|connection (?:refused|reset|timed out)|timed out|"
    r"early eof|remote end hung up|returned error: (?:408|429|5\d\d)|ssl|tls|gnutls|"
    r"temporary failure|network is unreachable|transfer closed|rpc failed|operation too slow",
    re.IGNORECASE,
)


# What git may read from the worker's environment; everything else (API keys, DATABASE_URL, the
# codec keys) stays out of reach of whatever a worktree's config makes git run.
_GIT_ENV = frozenset({"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "SSL_CERT_FILE", "SSL_CERT_DIR",
                      "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSH", "GIT_SSH_COMMAND", "SSH_AUTH_SOCK"})
# The commands that reach the remote, and so get the clone token.
_NETWORK_COMMANDS = frozenset({"clone", "fetch", "push", "ls-remote", "pull", "remote"})


class GitCheckouts:
    """The cache of shallow checkouts: `locked(repo)` holds a repository's checkout exclusively,
    `checkout(repo, branch)` (under that lock) brings it to the branch's head, `run` runs git."""

    def __init__(
        self,
        cache_dir: str | Path,
        *,
        clone_url_template: str = DEFAULT_CLONE_URL_TEMPLATE,
        token: str | Secret | None = None,
        depth: int = 50,
        git: str = "git",
        git_timeout: float = 120.0,
        lock_timeout: float = 300.0,
    ) -> None:
        if "{repo}" not in clone_url_template:
            raise ValueError("clone_url_template must contain {repo}")
        self.cache_dir = Path(cache_dir).expanduser()
        self.clone_url_template = clone_url_template
        self._token = token
        self.depth = depth
        self.git = git
        self.git_timeout = git_timeout
        self.lock_timeout = lock_timeout

    def __repr__(self) -> str:
        # Never the token: this object may end up in a log line or a traceback.
        token = "set" if self._token_value() else "none"
        return f"GitCheckouts(cache_dir={str(self.cache_dir)!r}, url={self.clone_url_template!r}, token={token})"

    def path(self, repo: str) -> Path:
        owner, name = self.split_repo(repo)
        return self.cache_dir / owner / name

    def lock_path(self, repo: str) -> Path:
        owner, name = self.split_repo(repo)
        return self.cache_dir / LOCKS / owner / f"{name}.lock"

    @staticmethod
    def split_repo(repo: str) -> tuple[str, str]:
        owner, _, name = repo.partition("/")
        # ".." would escape the cache directory; the card pattern allows dots.
        if not (_SAFE_NAME.match(owner) and _SAFE_NAME.match(name)) or ".." in repo:
            raise UpstreamError(f"invalid repository name {repo!r}", kind="invalid_request", retryable=False)
        return owner, name

    @staticmethod
    def check_branch(branch: str | None, repo: str) -> str | None:
        if branch is None:
            return None
        # A branch from a board is untrusted: "--upload-pack=..." must never reach git as an option.
        if not SAFE_BRANCH.match(branch) or ".." in branch or "//" in branch or branch.endswith((".lock", "/", ".")):
            raise UpstreamError(f"invalid branch name {branch!r} for {repo}", kind="invalid_request", retryable=False)
        return branch

    @contextmanager
    def locked(self, repo: str) -> Iterator[None]:
        lock_path = self.lock_path(repo)
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        # One open file description per acquisition: flock then excludes threads of this
        # process as well as other processes sharing the cache directory.
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise UpstreamError(
                            f"checkout of {repo} is busy (lock held over {self.lock_timeout:.0f}s)",
                            kind="unavailable", retryable=True,
                        ) from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def checkout(self, repo: str, branch: str | None) -> Checkout:
        """Clone or update the checkout of `repo` at `branch` (None: the default branch); hold `locked(repo)`."""
        dest = self.path(repo)
        url = self.clone_url_template.format(repo=repo)
        ref = branch or "HEAD"
        what = f"branch {branch}" if branch else "the default branch"
        try:
            if (dest / ".git").is_dir():
                try:
                    self.run(["remote", "set-url", "origin", url], dest)
                    self.run(["fetch", "--depth", str(self.depth), "--no-tags", "--quiet", "origin", ref], dest)
                    self.run(["checkout", "--force", "--quiet", "FETCH_HEAD"], dest)
                except GitFailed as exc:
                    if exc.timed_out or _MISSING_BRANCH.search(exc.detail) or _PERMANENT.search(exc.detail) \
                            or _TRANSIENT.search(exc.detail):
                        raise
                    # Anything else is the cache's own trouble (a stale index.lock after a
                    # crash, a corrupt object): start over from a fresh clone.
                    shutil.rmtree(dest, ignore_errors=True)
                    self._clone(url, branch, dest)
            else:
                self._clone(url, branch, dest)
            head = self.run(["log", "-1", "--format=%H %cI", "HEAD"], dest).split()
        except GitFailed as exc:
            raise self._unavailable(exc, repo, what) from None
        committed_at = None
        if len(head) > 1:
            try:
                committed_at = datetime.fromisoformat(head[1])
            except ValueError:
                committed_at = None
        return Checkout(repo=repo, branch=branch, path=dest, sha=head[0], committed_at=committed_at)

    def _clone(self, url: str, branch: str | None, dest: Path) -> None:
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)  # a partial clone left by a crash or a timeout
        elif dest.exists() or dest.is_symlink():
            dest.unlink()  # a lock file where earlier versions kept locks beside checkouts
        dest.parent.mkdir(parents=True, exist_ok=True)
        args = ["clone", "--depth", str(self.depth), "--no-tags", "--quiet"]
        if branch:
            args += ["--branch", branch]
        try:
            self.run([*args, "--", url, str(dest)], dest.parent)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise

    def _unavailable(self, exc: GitFailed, repo: str, what: str) -> UpstreamError:
        detail = exc.detail
        if exc.timed_out:
            return UpstreamError(f"git {exc.command} of {repo} timed out after {self.git_timeout:.0f}s",
                                 kind="timeout", retryable=True)
        if _MISSING_BRANCH.search(detail):
            return UpstreamError(f"{what} not found in {repo}", kind="not_found", retryable=False)
        if _PERMANENT.search(detail) and not _TRANSIENT.search(detail):
            return UpstreamError(f"git {exc.command} of {repo} failed: {detail}", kind="invalid_request",
                                 retryable=False)
        return UpstreamError(f"git {exc.command} of {repo} failed: {detail}", kind="unavailable", retryable=True)

    # --- running git -------------------------------------------------------------------------

    def _token_value(self) -> str | None:
        return reveal(self._token)

    def env(self, *, network: bool = True) -> dict[str, str]:
        """git's environment: only what git needs from the worker's (never its API keys or
        database URL: a worktree's git config can make git run a program, a filter or an
        fsmonitor the agent wrote), and the clone token only for commands that reach the remote."""
        env = {k: v for k, v in os.environ.items() if k in _GIT_ENV or k.lower().endswith("_proxy")}
        env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANG="C")
        config = [
            ("credential.helper", ""),      # a helper could store the token on the worker's disk
            ("http.lowSpeedLimit", "1000"),  # a stalled transfer fails instead of hanging
            ("http.lowSpeedTime", "30"),
            ("protocol.ext.allow", "never"),
            ("core.hooksPath", os.devnull),  # the repository's hooks never run here
            # Programs a repository's own config could make the worker's git run (these settings
            # override it): an fsmonitor on every status, a signing program on every commit.
            ("core.fsmonitor", "false"),
            ("commit.gpgSign", "false"),
            ("tag.gpgSign", "false"),
        ]
        token = self._token_value() if network else None
        url = self.clone_url_template
        parts = urlsplit(url)
        if token and parts.scheme in ("https", "http") and "@" not in parts.netloc:
            base = f"{parts.scheme}://{parts.netloc}/"
            authed = f"{parts.scheme}://x-access-token:{quote(token, safe='')}@{parts.netloc}/"
            config.append((f"url.{authed}.insteadOf", base))
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        return env

    def scrub(self, text: str) -> str:
        token = self._token_value()
        if token:
            for secret in {token, quote(token, safe=""), quote(token),
                           base64.b64encode(f"x-access-token:{token}".encode()).decode()}:
                text = text.replace(secret, "***")
        # Any credentials in a URL, whoever put them there.
        return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s'\"]+@", r"\1***@", text)

    def run(self, args: list[str], cwd: Path) -> str:
        command = next((a for a in args if not a.startswith("-") and "=" not in a), args[0])
        try:
            proc = subprocess.Popen(
                [self.git, *args],
                cwd=cwd,
                env=self.env(network=command in _NETWORK_COMMANDS),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a timeout kills git's helpers (git-remote-https) too
            )
        except FileNotFoundError:
            raise UpstreamError(f"git ({self.git}) is not installed on this worker", kind="not_configured",
                                retryable=False) from None
        try:
            out, err = proc.communicate(timeout=self.git_timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise GitFailed(command, "timed out", timed_out=True) from None
        if proc.returncode != 0:
            text = self.scrub(err.decode("utf-8", "replace")).strip()
            lines = [ln for ln in text.splitlines() if ln.strip()][-4:]
            detail = " | ".join(lines)[-600:] or f"exit status {proc.returncode}"
            raise GitFailed(command, detail)
        return out.decode("utf-8", "replace")
