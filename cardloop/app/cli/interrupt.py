"""asyncio.run for the commands that wait on Temporal, with Ctrl-C that works at once.

asyncio.run handles SIGINT with a Python-level handler, which runs only when the main thread
next runs Python code. While a command waits on the Temporal SDK (a connect to a server that
accepts and never answers, an RPC), the signal is usually delivered to one of the SDK's Rust
threads, the main thread sleeps on the event loop's selector, and Ctrl-C did nothing until the
SDK's own timeout (30 s for a connect) ended the wait. A handler on the event loop (its wakeup
fd) wakes it from any thread: the command's task is cancelled there and then, its `finally`
blocks run (the store is closed), and the console script exits 130 without a traceback, as on a
Ctrl-C anywhere else (main.py run)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    interrupted = stopped = False

    async def runner() -> T | None:
        nonlocal stopped
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_sigint() -> None:
            nonlocal interrupted
            if interrupted:
                return  # the first one is cancelling: its clean-up must not be cut short
            interrupted = True
            task.cancel()

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            return await main
        except asyncio.CancelledError:
            if not interrupted:
                raise
            stopped = True  # a command that ended just as Ctrl-C came keeps its own result
            return None
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    result = asyncio.run(runner())
    if stopped:
        raise KeyboardInterrupt
    return result  # type: ignore[return-value]  # None only when stopped


__all__ = ["run_interruptible"]
