"""How the commands that start a stack (`cardloop dev`, `cardloop demo`) own it and let go of it.

One stack per data dir. Two Temporal dev servers on one SQLite file corrupt each other's shard
ownership ("Shard is owned by ..."), so whoever starts the stack holds an exclusive fcntl lock
on `<data dir>/stack.lock` for as long as its server runs, and writes there who it is and where
its server listens. A second command on the same data dir reads that and refuses with a line
naming the running one (DataDirBusy). The kernel drops the lock when the holder dies, however it
dies: a stale file never blocks anyone. The lock is on the open file, which the Temporal child
process does not inherit (Popen closes it), so a server orphaned by SIGKILL does not hold it;
its port does, and start-up says so.

SIGINT and SIGTERM stop everything, always, quietly (run_until_stopped). The first one either
ends the command's wait (wait_for_stop: the stack was serving and stops as asked, exit 0) or
cancels the command where it is (mid-start, mid-demo: exit 128 + the signal's number); either
way the command's `finally` blocks stop the worker, the API and the Temporal server in order.
Signals that arrive while it stops are ignored: a second Ctrl-C must not cut the clean-up
short and leave the server running on its ports. Stopping is bounded all the same: an activity
thread that never notices its cancel (the SDK raises it into the thread asynchronously, and a
thread that is just starting can lose it and hang) must not keep the command alive. After a
signal the event loop is not drained of such leftovers (the process exits next, without
finalization: cli/main.py run), and a watchdog started by the first signal kills the child
processes the stack registered (the Temporal server) and exits if the clean-up has not ended
within STOP_DEADLINE seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardloop.contracts.errors import CardloopError

LOCK_NAME = "stack.lock"
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The worker gets 10 s, the Temporal server 15 s (then SIGKILL): the clean-up ends well before this.
STOP_DEADLINE = 45.0

# Child processes a forced exit must not leave behind (TemporalDevServer registers its server).
_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()


def own_child(proc: subprocess.Popen[bytes]) -> None:
    with _children_lock:
        _children.add(proc)


def disown_child(proc: subprocess.Popen[bytes]) -> None:
    with _children_lock:
        _children.discard(proc)


def _force_exit(code: int, say: Callable[[str], None]) -> None:
    """The watchdog's last resort: kill what the stack started, then leave at once."""
    with _children_lock:
        children = list(_children)
    for proc in children:
        with contextlib.suppress(Exception):
            proc.kill()
            proc.wait(5)
    with contextlib.suppress(Exception):
        say(f"stopping took longer than {STOP_DEADLINE:.0f} s: killed "
            + (", ".join(f"pid {p.pid}" for p in children) or "nothing") + " and exiting")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class DataDirBusy(CardloopError):
    """Another process runs a stack on this data dir."""

    exit_code = 1

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass
class StackLock:
    path: Path
    fd: int | None
    info: dict[str, Any] = field(default_factory=dict)

    def describe(self, **info: Any) -> None:
        """Say where this stack listens, for a command that finds the data dir taken."""
        if self.fd is None:
            return
        self.info.update({k: v for k, v in info.items() if v is not None})
        data = json.dumps(self.info).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the file drops the lock


def read_holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def holder_words(holder: dict[str, Any]) -> str:
    """`cardloop dev` (pid 4242; Temporal on 127.0.0.1:7233, UI http://127.0.0.1:8233)"""
    what = f"`cardloop {holder['command']}`" if holder.get("command") else "another cardloop"
    where = [f"pid {holder['pid']}"] if holder.get("pid") else []
    if holder.get("temporal"):
        where.append(f"Temporal on {holder['temporal']}")
    if holder.get("ui"):
        where.append(f"UI {holder['ui']}")
    if holder.get("api"):
        where.append(f"API {holder['api']}")
    return what + (f" ({'; '.join(where)})" if where else "")


def lock_data_dir(root: Path, command: str) -> StackLock:
    """The exclusive right to run a stack on `root`, or DataDirBusy naming who has it."""
    path = root / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = read_holder(path)
        raise DataDirBusy(f"{root} is in use by {holder_words(holder)}: one Temporal server per data dir. "
                          "Stop that one first (Ctrl-C in its terminal"
                          + (f", or kill -TERM {holder['pid']}" if holder.get("pid") else "")
                          + "), or give this command its own data dir with CARDLOOP_DEV__DATA_DIR", holder) from None
    lock = StackLock(path, fd)
    lock.describe(pid=os.getpid(), command=command)
    return lock


@contextlib.contextmanager
def data_dir_lock(root: Path, command: str) -> Iterator[StackLock]:
    lock = lock_data_dir(root, command)
    try:
        yield lock
    finally:
        lock.release()


class _Stopper:
    """The signal handlers of one run_until_stopped."""

    def __init__(self, task: asyncio.Task[Any], say: Callable[[str], None]) -> None:
        self.task = task
        self.say = say
        self.signal: int | None = None
        self.waiting: asyncio.Event | None = None
        self.requested = asyncio.Event()

    def on_signal(self, sig: int) -> None:
        if self.signal is not None:
            return  # already stopping: let the clean-up finish
        self.signal = sig
        self.requested.set()
        code = 0 if self.waiting is not None else 128 + sig
        watchdog = threading.Timer(STOP_DEADLINE, _force_exit, (code, self.say))
        watchdog.daemon = True
        watchdog.start()
        if self.waiting is None:
            name = signal.Signals(sig).name
            self.say(f"{name}: stopping …")
            self.task.cancel()


_current: _Stopper | None = None


async def wait_for_stop() -> None:
    """Serve until SIGINT or SIGTERM; then return, and the caller stops what it started."""
    stopper = _current
    if stopper is None:  # not under run_until_stopped (tests): plain handlers
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        return
    stopper.waiting = stopper.requested
    await stopper.requested.wait()


def run_until_stopped(main: Callable[[], Awaitable[int]], *,
                      say: Callable[[str], None] | None = None) -> int:
    """main() on a new event loop under SIGINT/SIGTERM handlers (see the module's docstring).
    The exit code: main's, or 128 + the signal's number when a signal cut main short."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    stoppers: list[_Stopper] = []

    async def runner() -> int:
        global _current
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        stopper = _Stopper(task, say)
        stoppers.append(stopper)
        for sig in SIGNALS:
            loop.add_signal_handler(sig, stopper.on_signal, sig)
        _current = stopper
        try:
            return await main()
        except asyncio.CancelledError:
            if stopper.signal is None:
                raise
            return 128 + stopper.signal
        finally:
            _current = None
            # Until the process exits, a late signal finds the stack already stopped: ignore it
            # rather than let KeyboardInterrupt print a traceback.
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
                signal.signal(sig, signal.SIG_IGN)

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(runner())
    finally:
        if not (stoppers and stoppers[0].signal is not None):
            # A normal end: asyncio.run's teardown. After a signal, whatever did not stop in
            # time (see the module's docstring) is left to the process's exit instead.
            with contextlib.suppress(Exception):
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


async def finish_in_thread(func: Callable[[], Any]) -> Any:
    """Run `func` in a thread and wait for it even when cancelled meanwhile (then re-raise the
    cancel): a server that is starting must be known to have started, so it can be stopped."""
    future = asyncio.ensure_future(asyncio.to_thread(func))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await future
        raise


__all__ = ["STOP_DEADLINE", "DataDirBusy", "StackLock", "data_dir_lock", "disown_child", "finish_in_thread",
           "holder_words", "lock_data_dir", "own_child", "read_holder", "run_until_stopped", "wait_for_stop"]
