"""Where the embedded stack's log goes: everything, tracebacks included, to `cardloop.log` in
the data dir (0600, next to Temporal's own temporal.log); on the console one line per warning,
naming the file. A failing model call logs a traceback per attempt from the Temporal SDK
("Completing activity as failed ... Traceback"); that belongs in a file, not in a terminal
that shows the demo's progress. `cardloop worker` and `cardloop api` log to stdout as before:
there the platform (Kubernetes, systemd) collects the stream."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from cardloop.app.jsonlogs import RedactedText
from cardloop.prompts.scrub import redact_text

LOG_NAME = "cardloop.log"
# The Temporal SDK appends its context as a dict: "Completing activity as failed ({'activity_id': ...})".
_CONTEXT = re.compile(r"\s*\(\{.*\}\)\s*\Z", re.DOTALL)
_HANDLERS: list[logging.Handler] = []
# Temporal core's warnings about races it resolves itself (an activity that completed after its
# cancel, a query or task for a run the worker no longer holds): nothing for the terminal to act on.
_BENIGN_CORE = ("Activity not found on completion", "Query not found when attempting to respond",
                "Task not found when completing")


class QuietConsole(logging.Filter):
    """Keeps off the terminal (not off the file) what says nothing to its reader: an activity
    that failed with a reason cardloop raised on purpose (an ApplicationError, whose reason the
    card's run records and the stage's own line says) and core's benign races above."""

    def filter(self, record: logging.LogRecord) -> bool:
        from temporalio.exceptions import ApplicationError

        message = record.getMessage()
        if message.startswith("Completing activity as failed") and record.exc_info \
                and isinstance(record.exc_info[1], ApplicationError):
            return False
        return not (message.startswith("[sdk_core::") and any(part in message for part in _BENIGN_CORE))


class OneLine(logging.Formatter):
    """level: the message's first line[: the exception's first line] (details: FILE)."""

    def __init__(self, log_file: Path) -> None:
        super().__init__()
        self.log_file = log_file

    def format(self, record: logging.LogRecord) -> str:
        # Redacted whole, before a line or the length is cut: a cut secret is no longer recognised.
        text = redact_text(_CONTEXT.sub("", record.getMessage()).strip())
        lines = text.splitlines()
        text = lines[0] if lines else ""
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            first = (redact_text(str(exc)).splitlines() or [""])[0]
            if first and first not in text:
                text += f": {type(exc).__name__}: {first}"
        if len(text) > 300:
            text = text[:299] + "…"
        return f"{record.levelname.lower()}: {text} (details: {self.log_file})"


def log_to_data_dir(root: Path, *, console_level: int = logging.WARNING,
                    console: TextIO | None = None) -> Path:
    """Route the process's logging as the module says; returns the log file's path."""
    path = root / LOG_NAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setLevel(logging.INFO)
    to_file.setFormatter(RedactedText("%(asctime)s %(levelname)s %(name)s: %(message)s"))  # no secret, ever
    to_console = logging.StreamHandler(console or sys.stderr)
    to_console.setLevel(console_level)
    to_console.setFormatter(OneLine(path))
    to_console.addFilter(QuietConsole())
    top = logging.getLogger()
    for old in _HANDLERS:
        top.removeHandler(old)
        old.close()
    _HANDLERS[:] = [to_file, to_console]
    for handler in _HANDLERS:
        top.addHandler(handler)
    top.setLevel(logging.INFO)
    sys.unraisablehook = _unraisable
    threading.excepthook = _thread_failed
    return path


def _unraisable(info: Any) -> None:
    """"Exception ignored in thread started by ...": the SDK cancels an activity by raising into
    its thread, and a thread that is just starting may catch it instead. Noise for the file."""
    logging.getLogger("cardloop.threads").info(
        "%s: %r", info.err_msg or "Exception ignored in", info.object,
        exc_info=(info.exc_type, info.exc_value, info.exc_traceback) if info.exc_value is not None else None)


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("cardloop.threads").warning(
        "thread %s failed", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


__all__ = ["LOG_NAME", "OneLine", "log_to_data_dir"]
