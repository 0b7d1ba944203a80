"""run_command's sandbox: what a command the model asked for may do on the worker.

- working directory inside the workspace (the tool checks the path; here it is given);
- its own session and process group, and on a timeout, when its caller stops it (the stage
  was cancelled) or when the worker dies (even by SIGKILL: the supervisor below), the whole
  group is killed (SIGKILL), so `sleep 1000 & wait` leaves nothing behind; where a PID
  namespace can be made (`unshare --pid --fork --kill-child`), a process that left the group
  with setsid dies too, because the namespace dies with its first process;
- the output (stdout and stderr merged) is read as it comes and capped: the first and last
  halves of `output_bytes` are kept, the middle is counted and dropped;
- an environment built from an allow-list (PATH, locale, TZ, TERM and the names configured),
  HOME set to the card's own directory: none of the worker's secrets (API keys, tokens,
  DATABASE_URL) is inherited, whatever their names;
- resource limits set in the child before it runs the command (a `python -I -S -c` supervisor
  forks it and calls setrlimit in the child before exec): CPU seconds, address space,
  processes, file size; soft = hard, so the command cannot raise them. RLIMIT_NPROC counts
  every process of the worker's user, and root is exempt from it;
- no network where a network namespace can be made (`unshare --net`, or `unshare -rn` as an
  unprivileged user with user namespaces): only a loopback interface that is down;
- where a mount namespace can be made too (`--mount`), a view of the files of its own: the
  directories and files in `SandboxLimits.hide` (every workspace and clone on the worker, the
  store, the data dir) are covered with an empty tmpfs (a file: /dev/null), and only the call's
  `WorkspaceView` is mounted back: its worktree, the card's HOME and the clone's git directory
  writable, the clone's git config read-only, and /proc is its PID namespace's own (through the
  host's, /proc/<pid>/root of another process of the worker's user reaches every file). So a
  command reads no other card's code or history, and cannot write the config the worker's own
  git reads (see sources/repository/git.py).

`detect_protections` finds out once per process which of these the platform allows;
`Protections.describe()` says so in words (for `cardloop doctor` and the stage's details).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

STOP_POLL = 0.2  # seconds between looks at a run's stop event

DEFAULT_ENV_ALLOW: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")

# The command's first process: a small supervisor between the worker and the command.
# - It asks the kernel for SIGTERM when the worker dies (prctl PR_SET_PDEATHSIG; the worker's
#   thread that started it, which lives as long as the worker), and then kills the command's
#   whole process group: a command must not go on in a workspace nobody owns any more, while a
#   retry runs it again elsewhere. A worker gone before the request is seen through getppid.
# - It forks the command with the limits set in the child only (soft = hard, capped at the
#   current hard limit: an unprivileged process cannot raise it), waits for it and ends the
#   way it ended (the same exit code, or killed by the same signal, without a core file).
# The namespace prefix (unshare ... --kill-child) runs after it, so the namespace dies with it.
_SUPERVISOR = """
import os, resource, signal, sys
parent, spec, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
def stop(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, stop)
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)
if os.getppid() != parent:
    stop()
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for item in spec.split(","):
        if item:
            name, value = item.split("=")
            which = getattr(resource, "RLIMIT_" + name)
            hard = resource.getrlimit(which)[1]
            v = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
            resource.setrlimit(which, (v, v))
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        sys.stderr.write(f"{argv[0]}: {err.strerror}\\n")
        os._exit(127)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
if code < 0:
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code & 0xFF)
"""


# Run inside the mount namespace (unshare --mount, as root of its user namespace or as real
# root), before the command: covers each hidden path, then mounts the view's paths back from
# file descriptors opened before anything was covered (a path under a covered directory cannot
# be reached by name any more), read-only ones remounted read-only with the flags the kernel
# locked on them kept (nosuid, nodev, noexec, atime: a user namespace may not clear them), then
# changes into the working directory again through the new mounts and runs the command.
# argv: spec (JSON: hide, keep [[path, writable], ...], cwd), then the command's argv.
_MOUNTS = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC = 1, 2, 4, 8, 32, 4096, 16384
LOCKED = ((2, 2), (4, 4), (8, 8), (1024, 1024), (2048, 2048), (4096, 1 << 21))
def mount(src, target, fstype, flags, data=None):
    enc = lambda v: v.encode() if v is not None else None
    if libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), target)
spec, argv = json.loads(sys.argv[1]), sys.argv[2:]
try:
    held = [(os.open(path, os.O_PATH | os.O_CLOEXEC), path, writable)
            for path, writable in spec["keep"] if os.path.lexists(path)]
    for path in spec["hide"]:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", NOSUID | NODEV, "mode=0755,size=64k")
        elif os.path.exists(path):
            mount("/dev/null", path, None, BIND)
    for fd, path, writable in held:
        if os.path.isdir("/proc/self/fd/%d" % fd):
            os.makedirs(path, exist_ok=True)
        elif not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        mount("/proc/self/fd/%d" % fd, path, None, BIND | REC)
        if not writable:
            have = os.statvfs(path).f_flag
            locked = sum(ms for st, ms in LOCKED if have & st)
            mount(None, path, None, REMOUNT | BIND | RDONLY | locked)
        os.close(fd)
    os.chdir(spec["cwd"])
except OSError as err:
    sys.stderr.write("sandbox: cannot set up the command's files: %s\\n" % err)
    os._exit(126)
os.execv(argv[0], argv)
"""


@dataclass(frozen=True)
class WorkspaceView:
    """What one command sees of the hidden paths: `writable` and `read_only` paths mounted back
    (a path under a writable one may be read-only: the clone's config inside its git dir)."""

    writable: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()

    def keep(self) -> list[tuple[str, bool]]:
        # Outer paths first, so a read-only file is mounted over its writable directory.
        pairs = [(os.path.realpath(p), True) for p in self.writable]
        pairs += [(os.path.realpath(p), False) for p in self.read_only]
        return sorted(pairs, key=lambda pw: (pw[0].count(os.sep), not pw[1]))


@dataclass(frozen=True)
class SandboxLimits:
    timeout: float = 300.0
    output_bytes: int = 1_000_000
    cpu_seconds: int = 600
    memory_mb: int = 4096
    max_processes: int = 512
    max_file_mb: int = 512
    network: bool = False  # False: no network where the platform allows it
    env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW
    # Prepended to PATH: by default the worker's interpreter's directory, so Python tools
    # installed with the worker (pytest) are found.
    path_prepend: tuple[str, ...] = field(default_factory=lambda: (os.path.dirname(sys.executable),))
    # Directories and files no command may see (where a mount namespace can be made): the
    # worker's workspaces and clones, its store and data dir (sandbox_limits fills them in).
    hide: tuple[str, ...] = ()

    def rlimits(self) -> dict[str, int]:
        mb = 1024 * 1024
        return {"CPU": self.cpu_seconds, "AS": self.memory_mb * mb, "NPROC": self.max_processes,
                "FSIZE": self.max_file_mb * mb}


@dataclass(frozen=True)
class Protections:
    """Which protections a command gets on this worker."""

    network_isolated: bool
    pid_namespace: bool
    namespace_prefix: tuple[str, ...]  # the unshare command line that provides them, or ()
    rlimits: bool
    why_not: tuple[str, ...] = ()
    # The prefix with --mount added, when a mount namespace works and the view was mounted in
    # a trial run; () otherwise (commands then see every file the worker's user can).
    mount_prefix: tuple[str, ...] = ()
    why_no_mounts: str = ""

    def describe(self, limits: SandboxLimits) -> list[str]:
        lines = [
            f"timeout {limits.timeout:g}s, the whole process group killed",
            f"output capped at {limits.output_bytes:,} bytes (head and tail kept)",
            f"environment from an allow-list ({', '.join(limits.env_allow)}), HOME per card",
        ]
        if self.rlimits:
            lines.append(f"limits: CPU {limits.cpu_seconds}s, memory {limits.memory_mb} MB, "
                         f"{limits.max_processes} processes, files {limits.max_file_mb} MB")
        else:
            lines.append("no resource limits (setrlimit unavailable)")
        if limits.network:
            lines.append("network allowed (configured)")
        elif self.network_isolated:
            lines.append("no network (own network namespace: " + " ".join(self.namespace_prefix) + ")")
        else:
            lines.append("network NOT isolated: " + ("; ".join(self.why_not) or "no unshare"))
        lines.append("own PID namespace: escaped children die with the command" if self.pid_namespace
                     else "no PID namespace: a child that calls setsid can outlive a timeout")
        if self.mount_prefix:
            hidden = ", ".join(limits.hide) or "nothing configured"
            lines.append(f"own mount namespace: hidden from commands: {hidden}; the card's worktree, "
                         "HOME and git directory mounted back, the clone's git config read-only")
        else:
            lines.append("no mount namespace: a command can read other cards' workspaces and the store, "
                         "and write the clone's git config (" + (self.why_no_mounts or "no unshare") + ")")
        return lines


def _works(argv: Sequence[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run([*argv, "true"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{' '.join(argv)}: {exc}"
    detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return done.returncode == 0, f"{' '.join(argv)}: {detail[-1] if detail else f'exit {done.returncode}'}"


@functools.cache
def detect_protections(network: bool = False, unshare: str | None = None) -> Protections:
    """Try the namespace variants once (about 10 ms each) and keep the strongest that works."""
    rlimits = sys.platform.startswith("linux") or sys.platform == "darwin"
    path = unshare or shutil.which("unshare")
    if path is None:
        return Protections(False, False, (), rlimits, ("unshare (util-linux) not found",))
    pid = ("--pid", "--fork", "--kill-child")
    net = () if network else ("--net",)
    candidates: list[tuple[tuple[str, ...], bool, bool]] = []
    for user in ((), ("--user", "--map-root-user")):
        candidates.append(((path, *user, *net, *pid), not network, True))
        if net:
            candidates.append(((path, *user, *net), True, False))
    why: list[str] = []
    for argv, isolated, has_pid in candidates:
        ok, detail = _works(argv)
        if ok:
            # The view needs a /proc of the command's own PID namespace too: through the host's,
            # /proc/<pid>/root of any process of the same user (another card's command, the dev
            # stack's Temporal) reaches every hidden file.
            mounts, why_not = (_mounts_work((argv[0], "--mount", "--mount-proc", *argv[1:], "--")) if has_pid
                               else ((), "no PID namespace, so no /proc of its own"))
            return Protections(isolated, has_pid, (*argv, "--"), rlimits, mount_prefix=mounts,
                               why_no_mounts=why_not)
        why.append(detail)
    return Protections(False, False, (), rlimits, tuple(why[-2:]), why_no_mounts="no namespace can be made")


def _mounts_work(prefix: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """`prefix` when a trial command under it sees what a view promises: a hidden directory
    empty but the paths kept inside it there, a read-only one's files unwritable but a writable
    directory inside it writable. Else () and why (a container's seccomp profile, say, refuses
    the mount namespace or tmpfs)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cardloop-mounts-") as tmp:
        hidden = Path(tmp).resolve() / "hidden"
        kept, clone = hidden / "kept", hidden / "clone"
        for d in (kept, clone / "objects"):
            d.mkdir(parents=True)
        (hidden / "secret").write_text("x")
        (clone / "config").write_text("x")
        view = WorkspaceView(writable=(str(kept), str(clone / "objects")), read_only=(str(clone),))
        check = (f"test ! -e ../secret && test ! -e /proc/{os.getpid()} && touch new ../clone/objects/new && "
                 "! (echo y >> ../clone/config) 2>/dev/null && ! mv new ../clone/config 2>/dev/null")
        argv = [*prefix, *_view_argv(view, (str(hidden),), str(kept)), "/bin/sh", "-c", check]
        try:
            done = subprocess.run(argv, cwd=kept, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return (), f"{' '.join(prefix)}: {exc}"
        if done.returncode == 0 and (kept / "new").exists() and (clone / "objects" / "new").exists() \
                and (clone / "config").read_text() == "x":
            return prefix, ""
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return (), f"{' '.join(prefix)}: {detail[-1] if detail else f'exit {done.returncode}'}"


def _view_argv(view: WorkspaceView, hide: Sequence[str], cwd: str) -> list[str]:
    import json

    # Outer hidden paths first: a tmpfs over a directory also covers what is inside it.
    hidden = sorted({os.path.realpath(p) for p in hide}, key=lambda p: p.count(os.sep))
    spec = json.dumps({"hide": hidden, "keep": view.keep(), "cwd": os.path.realpath(cwd)})
    return [sys.executable, "-I", "-S", "-c", _MOUNTS, spec]


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None: killed by the timeout or stopped
    output: str
    timed_out: bool
    dropped_bytes: int     # output beyond the cap, not kept
    seconds: float
    stopped: bool = False  # killed because its caller asked (the stage was cancelled)


class _Capture:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            over = len(self.tail) - self.half
            if over > 0:
                del self.tail[:over]
                self.dropped += over

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped:,} bytes of output cut ...]\n{tail}"
        return head + tail


class Sandbox:
    def __init__(self, limits: SandboxLimits | None = None, protections: Protections | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.protections = protections or detect_protections(self.limits.network)

    def describe(self) -> list[str]:
        return self.protections.describe(self.limits)

    def env(self, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: os.environ[k] for k in self.limits.env_allow if k in os.environ}
        path = [*self.limits.path_prepend, env.get("PATH", os.defpath)]
        env.update(
            PATH=os.pathsep.join(p for p in path if p),
            HOME=str(home),
            TMPDIR=str(home / "tmp"),
            CI="1",  # test runners and package managers stay non-interactive
            GIT_TERMINAL_PROMPT="0",
            GIT_CONFIG_NOSYSTEM="1",
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update(extra or {})
        return env

    def argv(self, command: str, view: WorkspaceView | None = None, cwd: Path | None = None) -> list[str]:
        spec = ",".join(f"{k}={v}" for k, v in self.limits.rlimits().items()) if self.protections.rlimits else ""
        supervisor = [sys.executable, "-I", "-S", "-c", _SUPERVISOR, str(os.getpid()), spec]
        if view is not None and self.protections.mount_prefix:
            return [*supervisor, *self.protections.mount_prefix,
                    *_view_argv(view, self.limits.hide, str(cwd or os.getcwd())), "/bin/sh", "-c", command]
        return [*supervisor, *self.protections.namespace_prefix, "/bin/sh", "-c", command]

    def run(self, command: str, cwd: Path, home: Path, *, timeout: float | None = None,
            stop: threading.Event | None = None, view: WorkspaceView | None = None) -> CommandResult:
        """Run `command`; it is killed with its process group at the timeout, or as soon as
        `stop` is set (checked every STOP_POLL seconds). With a `view`, and where a mount
        namespace can be made, the command sees `limits.hide` only as `view` mounts it back."""
        timeout = self.limits.timeout if timeout is None else min(timeout, self.limits.timeout)
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        capture = _Capture(self.limits.output_bytes)
        started = time.monotonic()
        proc = subprocess.Popen(
            self.argv(command, view, cwd), cwd=cwd, env=self.env(home), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        assert proc.stdout is not None
        stream = proc.stdout

        def pump() -> None:
            with suppress(OSError, ValueError):
                while chunk := stream.read1(65536):
                    capture.feed(chunk)

        reader = threading.Thread(target=pump, name="sandbox-output", daemon=True)
        reader.start()
        timed_out = stopped = False
        deadline = started + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    proc.wait(timeout=max(min(left, STOP_POLL) if stop is not None else left, 0))
                    break
                except subprocess.TimeoutExpired:
                    if stop is not None and stop.is_set():
                        stopped = True
                        break
                    if time.monotonic() >= deadline:
                        timed_out = True
                        break
        finally:
            # Always: a command that exited may have left children running in its group.
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)  # a process outside the group may still hold the pipe open
        stream.close()
        return CommandResult(None if timed_out or stopped else proc.returncode, capture.text(), timed_out,
                             capture.dropped, time.monotonic() - started, stopped)
