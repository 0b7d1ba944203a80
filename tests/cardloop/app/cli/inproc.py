"""The `cardloop` command run inside the test process, for tests about what a command says and
its exit code rather than about the process itself.

A real `cardloop` subprocess pays 0.7 to 1.3 s of CPU importing SQLAlchemy, the pydantic config
models and tiktoken before it does anything; on a 2-core CI machine that was most of what the
CLI tests cost. Here the imports are paid once per pytest process.

What stays a real subprocess (tests/cardloop/app/cli/test_exit.py, test_surrogates.py,
test_bad_input.py, test_startup_*.py and one test in each converted file): the console script's
own exit path (os._exit once Temporal ran), a closed stdout, argv bytes that are not UTF-8,
signals, start-up imports and time.

Not for async tests: a command may call asyncio.run(), which refuses to run inside a running
event loop.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from cardloop.app.cli import main as cli_main
from cardloop.app.cli import startup_gc
from tests.conftest import ROOT

CLI = Path(sys.executable).parent / "cardloop"

# What the console script's streams use under this machine's and CI's locale (C.UTF-8, where
# Python treats the locale like C): stdin and stdout utf-8 with surrogateescape, stderr with
# backslashreplace. The test side then decodes as subprocess.run(text=True) does: utf-8, strict,
# universal newlines, so output a real process could not have printed fails the same way.
_STREAM_ENCODING = "utf-8"
_STDIN_ERRORS = _STDOUT_ERRORS = "surrogateescape"
_STDERR_ERRORS = "backslashreplace"
_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def run_cli(args: Sequence[str], *, env: Mapping[str, str], cwd: Path | str = ROOT, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """`cardloop ARGS` as the console script runs it, in this process: ARGS through main(),
    SystemExit and unexpected exceptions turned into exit codes as `run()` does, os.environ
    replaced by ENV and the working directory by CWD for the call, stdin fed from INPUT (empty
    when None), stdout and stderr captured. Everything the command may change for the whole
    process (environment, cwd, standard streams, logging, SIGINT/SIGTERM handlers, warnings
    filters, the garbage collector) is put back afterwards, also when it fails.

    TIMEOUT is accepted for parity with subprocess.run and not enforced: a command cannot be
    stopped from outside without stopping the test process too."""
    del timeout
    argv = list(args)
    stdin = _stream(input.encode(_STREAM_ENCODING) if input is not None else b"", _STDIN_ERRORS)
    stdout = _stream(b"", _STDOUT_ERRORS)
    stderr = _stream(b"", _STDERR_ERRORS)
    with _process_state(env, cwd, argv, stdin, stdout, stderr):
        code = _main_as_console_script(argv)
    return subprocess.CompletedProcess([str(CLI), *argv], code, _text(stdout), _text(stderr))


def _main_as_console_script(argv: list[str]) -> int:
    """cardloop.app.cli.main.run() without its pause of the collector and its exit."""
    code = cli_main.exit_code(argv)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _stream(data: bytes, errors: str) -> io.TextIOWrapper:
    # A TextIOWrapper over bytes, not a StringIO: commands that write or read `.buffer` work.
    return io.TextIOWrapper(io.BytesIO(data), encoding=_STREAM_ENCODING, errors=errors, newline=None,
                            write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return raw.decode(_STREAM_ENCODING).replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _process_state(env: Mapping[str, str], cwd: Path | str, argv: list[str], stdin: io.TextIOWrapper,
                   stdout: io.TextIOWrapper, stderr: io.TextIOWrapper) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_original_streams = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    saved_argv = sys.argv
    saved_signals: dict[int, _Handler] = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    saved_logging = _logging_state()
    saved_gc = (gc.isenabled(), startup_gc._paused, gc.get_freeze_count())
    try:
        with warnings.catch_warnings():
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            sys.argv = [str(CLI), *argv]
            sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
            # Also the ones shutil.get_terminal_size() asks: argparse wraps help to the terminal's
            # width, which for the console script writing to a pipe is 80 columns, not the width
            # of the terminal pytest may run in.
            sys.__stdin__, sys.__stdout__, sys.__stderr__ = stdin, stdout, stderr
            yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = saved_original_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        _restore_logging(saved_logging)
        _restore_gc(*saved_gc)


_LoggerState = tuple[int, list[logging.Handler], bool, bool]


def _logging_state() -> tuple[int, dict[str, _LoggerState]]:
    loggers: dict[str, logging.Logger] = {"": logging.root}
    loggers.update((name, logger) for name, logger in logging.root.manager.loggerDict.items()
                   if isinstance(logger, logging.Logger))
    return logging.root.manager.disable, {
        name: (logger.level, list(logger.handlers), logger.propagate, logger.disabled)
        for name, logger in loggers.items()}


def _restore_logging(saved: tuple[int, dict[str, _LoggerState]]) -> None:
    disable, states = saved
    logging.disable(disable)
    _, now = _logging_state()
    for name, (_level, handlers, _propagate, _disabled) in now.items():
        logger = logging.root if name == "" else logging.getLogger(name)
        before = states.get(name, (logging.NOTSET, [], True, False))
        for handler in handlers:
            if handler not in before[1]:  # the command's own (a log file): closed, as its exit would
                logger.removeHandler(handler)
                with contextlib.suppress(Exception):
                    handler.close()
        logger.setLevel(before[0])
        logger.handlers[:] = before[1]
        logger.propagate, logger.disabled = before[2], before[3]


def _restore_gc(enabled: bool, paused: bool, frozen: int) -> None:
    # startup_gc.resume() is a no-op unless the console script paused the collector, which this
    # runner never does; should that change, an in-process run must not freeze pytest's objects.
    if gc.get_freeze_count() != frozen and frozen == 0:
        gc.unfreeze()
    startup_gc._paused = paused
    (gc.enable if enabled else gc.disable)()
