"""`cardloop worker` with one fault for chaos runs and tests: CHAOS_KILL_AFTER_REPLY=N makes
the worker SIGKILL itself right after the store committed its N-th model reply, before the
activity can report its completion to Temporal. That is the window in which a retried
llm.complete used to call the model again and act on a reply the history does not hold.

Run as a script (python bench/chaos_worker.py [worker options]); the environment configures
it like `cardloop worker`. Nothing here is part of the product: it only wraps the store."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from cardloop.store import Store

_lock = threading.Lock()
_replies = 0


def _count_reply() -> None:
    global _replies
    with _lock:
        _replies += 1
        hit = _replies == int(os.environ.get("CHAOS_KILL_AFTER_REPLY", "0"))
    if hit:
        print(f"chaos_worker: reply {_replies} stored, SIGKILL", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def _install() -> None:
    record_reply = getattr(Store, "record_reply", None)
    append_message = Store.append_message

    if record_reply is not None:  # the reply and its usage in one transaction
        def record_then_die(self: Store, *args: Any, **kwargs: Any) -> int:
            seq = record_reply(self, *args, **kwargs)
            _count_reply()
            return seq

        Store.record_reply = record_then_die  # type: ignore[method-assign]

    def append_then_die(self: Store, card_key: str, message: Any, **kwargs: Any) -> int:
        seq = append_message(self, card_key, message, **kwargs)
        # Releases before the ledger stored model replies through append_message (comments are
        # user messages; today's replies go through record_reply, which does not call it).
        if message.role == "assistant":
            _count_reply()
        return seq

    Store.append_message = append_then_die  # type: ignore[method-assign]


if __name__ == "__main__":
    if int(os.environ.get("CHAOS_KILL_AFTER_REPLY", "0")) > 0:
        _install()
    from cardloop.app.cli.main import run

    sys.argv = ["cardloop", "worker", *sys.argv[1:]]
    run()
