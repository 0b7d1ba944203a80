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

The agent's commands run as the worker's user, so everything git reads from disk in a checkout
or a worktree can be the agent's: the repository's config (filters, textconv, sshCommand,
remote URLs, `url.*.insteadOf`, `http.proxy`, includes), `config.worktree`, the `.git` file that
names a worktree's gitdir, the `commondir` file, and the worker's own ~/.gitconfig. So the
worker's git takes none of it: it runs with GIT_DIR, GIT_COMMON_DIR and GIT_WORK_TREE set from
paths the worker computes (`GitDirs`, never read from the work tree), no system or global
config, and before every command the repository's config is rewritten from what the worker
knows (the remote URL) and a short list of keys that name no program and no URL (`restore`);
commands that reach the remote name the worker's URL, not `origin`.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
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


@dataclass(frozen=True)
class GitDirs:
    """Where the worker's git finds a repository, as the worker computes it: the work tree, the
    gitdir (the clone's `.git`, or `.git/worktrees/<name>` for a linked worktree) and the common
    dir (the clone's `.git`), and the remote URL the worker set."""

    work_tree: Path
    git_dir: Path
    common_dir: Path
    url: str

    @property
    def linked(self) -> bool:
        return self.git_dir != self.common_dir

    def env(self) -> dict[str, str]:
        # GIT_COMMON_DIR wins over a `commondir` file, GIT_DIR over the work tree's `.git`, and
        # GIT_WORK_TREE over core.worktree.
        return {"GIT_DIR": str(self.git_dir), "GIT_COMMON_DIR": str(self.common_dir),
                "GIT_WORK_TREE": str(self.work_tree)}


# The repository config the worker's git reads is rewritten before every command: the remote URL
# from the worker, and of the rest only these keys, with values of these shapes. None names a
# program, a URL, a file to include or a helper; everything else (filters, diff drivers, hooks,
# sshCommand, askPass, url.*, http.*, include*, extensions.worktreeConfig, core.worktree, ...) goes.
_BOOL = r"(?i:true|false|yes|no|on|off|1|0)"
_REF = r"[A-Za-z0-9_][A-Za-z0-9_./+@-]*"
_KEEP: dict[tuple[str, str], str] = {
    ("core", "repositoryformatversion"): r"[01]",
    ("core", "filemode"): _BOOL,
    ("core", "logallrefupdates"): _BOOL,
    ("core", "ignorecase"): _BOOL,
    ("core", "precomposeunicode"): _BOOL,
    ("core", "symlinks"): _BOOL,
    ("extensions", "objectformat"): r"sha1|sha256",
    ("extensions", "refstorage"): r"files|reftable",
    ("user", "name"): r"[^\x00-\x1f\"\\#;]{1,200}",
    ("user", "email"): r"[^\x00-\x1f\"\\#;\s]{1,200}",
    ("remote", "fetch"): rf"\+?refs/heads/(?:{_REF}|\*):refs/remotes/origin/(?:{_REF}|\*)",
    ("remote", "tagopt"): r"--no-tags",
    ("branch", "remote"): r"origin",
    ("branch", "merge"): rf"refs/heads/{_REF}",
}
_SECTION = re.compile(r'^\[\s*([A-Za-z0-9.-]+)(?:\s+"([^"\\\n]*)")?\s*\](.*)\Z')
_ENTRY = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?\Z")
_RESTORE_LOCK = threading.Lock()  # two threads restoring one clone's config never interleave


def _kept_config(text: str) -> list[tuple[str, str | None, str, str]]:
    """(section, subsection, key, value) of `text`'s entries that `_KEEP` allows; anything this
    small parser does not understand (continuations, escapes, legacy sections) is dropped."""
    kept = []
    section: tuple[str, str | None] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION.match(line)
            rest = m.group(3).strip() if m else ""
            section = (m.group(1).lower(), m.group(2)) if m and (not rest or rest[0] in "#;") else None
            continue
        m = _ENTRY.match(line)
        if section is None or m is None:
            continue
        name, sub = section
        key = m.group(1).lower()
        value = (m.group(2) or "true").strip()
        if '"' not in value and "\\" not in value:
            value = re.split(r"\s[#;]", value, maxsplit=1)[0].strip()
        elif re.fullmatch(r'"[^"\\]*"', value):
            value = value[1:-1]
        else:
            continue
        if name in ("remote", "branch"):
            if sub is None or (name == "remote" and sub != "origin") or not re.fullmatch(_REF, sub):
                continue
        elif sub is not None:
            continue
        shape = _KEEP.get((name, key))
        if shape is not None and re.fullmatch(shape, value):
            kept.append((name, sub, key, value))
    return kept


def _config_text(url: str, kept: list[tuple[str, str | None, str, str]]) -> str:
    def q(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    values = {(n, s, k): v for n, s, k, v in kept if (n, s, k) != ("remote", "origin", "fetch")}
    extensions = {k: v for (n, _s, k), v in values.items() if n == "extensions"}
    core = {"repositoryformatversion": "1" if extensions else values.get(("core", None, "repositoryformatversion"),
                                                                           "0"),
            "filemode": values.get(("core", None, "filemode"), "true"), "bare": "false",
            "logallrefupdates": values.get(("core", None, "logallrefupdates"), "true")}
    for key in ("ignorecase", "precomposeunicode", "symlinks"):
        if ("core", None, key) in values:
            core[key] = values[("core", None, key)]
    lines = ["[core]", *(f"\t{k} = {v}" for k, v in core.items())]
    if extensions:
        lines += ["[extensions]", *(f"\t{k} = {v}" for k, v in extensions.items())]
    user = {k: v for (n, _s, k), v in values.items() if n == "user"}
    if user:
        lines += ["[user]", *(f"\t{k} = {q(v)}" for k, v in user.items())]
    fetch = [v for n, s, k, v in kept if (n, s, k) == ("remote", "origin", "fetch")]
    lines += ['[remote "origin"]', f"\turl = {q(url)}",
              *(f"\tfetch = {v}" for v in dict.fromkeys(fetch) or ["+refs/heads/*:refs/remotes/origin/*"])]
    if ("remote", "origin", "tagopt") in values:
        lines.append("\ttagOpt = --no-tags")
    branches = sorted({s for n, s, _k, _v in kept if n == "branch" and s})
    for branch in branches:
        lines.append(f'[branch "{branch}"]')
        lines += [f"\t{k} = {values[('branch', branch, k)]}" for k in ("remote", "merge")
                  if ("branch", branch, k) in values]
    return "\n".join(lines) + "\n"


_MAX_CONFIG = 1 << 20


def _read_regular(path: Path) -> str:
    """`path`'s text if it is a regular file under 1 MiB, else "": a command may have left a
    symlink to /dev/zero or a FIFO there, which must neither hang nor flood the worker."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_CONFIG:
            return ""
        return f.read(_MAX_CONFIG).decode("utf-8", "replace")


def _replace(path: Path, text: str) -> None:
    """Write `path` whole, if it differs: through a fresh temporary file (never one a command
    could have placed) renamed over it, so a symlink there is replaced, never followed."""
    if not path.is_symlink() and _read_regular(path) == text:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def _rewrite_in_place(path: Path, text: str) -> None:
    """Write `path` whole, if it differs, into the same file when it is a plain regular file (one
    link, not a symlink, fifo or device): a sandboxed command may hold a read-only mount on it,
    which a rename over the path would detach from that command (workspace/manager.py `view`).
    Anything else is replaced by a rename, as `_replace` does."""
    if _read_regular(path) == text:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return _replace(path, text)  # missing, a symlink, a fifo without a reader: made anew
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return _replace(path, text)
        data = text.encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


def restore(dirs: GitDirs) -> None:
    """Give the repository at `dirs` the config the worker's git may read (see `_KEEP`), drop
    every `config.worktree`, and point the worktree's `.git` file and the gitdir's back-pointers
    where the worker knows they belong (so the agent's own git sees the same repository)."""
    common = dirs.common_dir
    if not common.is_dir():
        return  # not cloned yet, or gone: git itself will say so
    with _RESTORE_LOCK:
        config = common / "config"
        _rewrite_in_place(config, _config_text(dirs.url, _kept_config(_read_regular(config))))
        for stray in {common / "config.worktree", dirs.git_dir / "config.worktree"}:
            with suppress(FileNotFoundError, IsADirectoryError):
                stray.unlink()
        if dirs.linked:
            if dirs.git_dir.is_dir():
                _replace(dirs.git_dir / "commondir", f"{os.path.relpath(common, dirs.git_dir)}\n")
                _replace(dirs.git_dir / "gitdir", f"{dirs.work_tree / '.git'}\n")
                if dirs.work_tree.is_dir() and not (dirs.work_tree / ".git").is_dir():
                    _replace(dirs.work_tree / ".git", f"gitdir: {dirs.git_dir}\n")
        else:
            with suppress(FileNotFoundError, IsADirectoryError):
                (common / "commondir").unlink()


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
            if (dest / ".git").is_dir() and not (dest / ".git").is_symlink():
                try:
                    # The URL, not `origin`: the remote's name is looked up in config (restored
                    # before each command, but a URL leaves nothing to look up).
                    self.run(["fetch", "--depth", str(self.depth), "--no-tags", "--quiet", url, ref], dest)
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
        # No system or global config: the worker's ~/.gitconfig is as writable to a command as the worktree.
        env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANG="C", GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL=os.devnull)
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

    def url(self, repo: str) -> str:
        return self.clone_url_template.format(repo=repo)

    def dirs(self, repo: str) -> GitDirs:
        """The checkout of `repo` as the worker's git must see it (see the module docstring)."""
        path = self.path(repo)
        return GitDirs(work_tree=path, git_dir=path / ".git", common_dir=path / ".git", url=self.url(repo))

    def _checkout_dirs(self, cwd: Path) -> GitDirs | None:
        """`dirs` of the checkout `cwd` is, when it is one of this cache's."""
        here = Path(os.path.abspath(cwd))
        if here.parent.parent != Path(os.path.abspath(self.cache_dir)):
            return None
        try:
            return self.dirs(f"{here.parent.name}/{here.name}")
        except UpstreamError:
            return None

    def run(self, args: list[str], cwd: Path, *, at: GitDirs | None = None) -> str:
        """git `args` in `cwd`. In a repository (`at`, or a checkout of this cache) git finds it
        only where the worker says, and its config is restored first (see `restore`)."""
        command = next((a for a in args if not a.startswith("-") and "=" not in a), args[0])
        env = self.env(network=command in _NETWORK_COMMANDS)
        at = at or self._checkout_dirs(cwd)
        if at is not None:
            restore(at)
            env.update(at.env())
        try:
            proc = subprocess.Popen(
                [self.git, *args],
                cwd=cwd,
                env=env,
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
