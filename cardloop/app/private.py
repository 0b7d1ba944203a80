"""Local state readable by its owner only: on a shared host the data directory holds every
card, prompt and key, so it is 0700 and the database files in it 0600 (whatever the umask)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from cardloop.contracts.errors import ConfigError


def private_dir(path: Path, setting: str = "") -> Path:
    """`path` (created with its parents if missing) with mode 0700. A path that cannot be a
    directory here (a file is there, a read-only parent) is a ConfigError naming it and the
    `setting` that chose it, not an OSError from deep inside a command."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocked = next((p for p in (path, *path.parents) if p.exists()), path)
        problem = (f"{path} is not a directory" if blocked == path and not blocked.is_dir()
                   else f"cannot create directory {path}: {blocked} is not a directory" if not blocked.is_dir()
                   else f"cannot create directory {path}: {exc.strerror or exc}")
        raise ConfigError(problem + (f" (set by {setting})" if setting else "")) from None
    with contextlib.suppress(PermissionError):  # a directory we do not own keeps its mode
        os.chmod(path, 0o700)
    return path


def private_files(*paths: Path) -> None:
    """Mode 0600 on each of `paths` that exists, and on SQLite's -wal/-shm files beside it."""
    for path in paths:
        for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            with contextlib.suppress(FileNotFoundError, PermissionError):
                os.chmod(candidate, 0o600)


_PR_SET_DUMPABLE = 4


def private_process() -> bool:
    """Make this process's /proc entries (environ, mem, cmdline's neighbours) unreadable by other
    processes of the same user: the agent's commands run as the worker's user, and the worker's
    environment holds its API keys and database URL. Linux only (prctl PR_SET_DUMPABLE 0: also no
    core dumps, and no same-user ptrace or py-spy without privileges). True when it took."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not os.path.isdir("/proc"):
        return False
    try:
        return ctypes.CDLL(name, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
