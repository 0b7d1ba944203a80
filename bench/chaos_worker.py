"""`cardloop worker` with one fault for chaos runs and tests: the worker SIGKILLs itself right
after the store committed a model reply, before the activity can report its completion to
Temporal. That is the window in which a retried llm.complete used to call the model again and
act on a reply the history does not hold.

The fault is shared by every worker of a run, so it fires whichever worker the replies go to:
CHAOS_KILL_DIR holds a reply counter all workers add to (under a file lock) and one token file per
kill still to happen; CHAOS_KILL_AFTER_REPLY=N arms this worker to die on the first reply it
stores once N replies were stored (by any worker) since it started, if it can claim a token
(unlinking one: the first worker to do so wins it). With one worker that is its own N-th reply.

Run as a script (python bench/chaos_worker.py [worker options]); the environment configures
it like `cardloop worker`. Nothing here is part of the product: it only wraps the store."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import Any

from cardloop.store import Store

COUNTER = "replies"


def count_reply(kill_dir: Path) -> int:
    """Add one to the run's reply counter; the new count."""
    with (kill_dir / COUNTER).open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        count = int(f.read() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(count))
        f.flush()
        return count


def replies_so_far(kill_dir: Path) -> int:
    with (kill_dir / COUNTER).open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        f.seek(0)
        return int(f.read() or 0)


def tokens_left(kill_dir: Path) -> list[Path]:
    return sorted(kill_dir.glob("token-*"))


def claim_token(kill_dir: Path) -> bool:
    for token in tokens_left(kill_dir):
        try:
            token.unlink()
            return True
        except FileNotFoundError:  # another worker claimed it first
            continue
    return False


class _Fault:
    def __init__(self, kill_dir: Path, after: int) -> None:
        self.kill_dir = kill_dir
        self.due_at = replies_so_far(kill_dir) + after

    def reply_stored(self) -> None:
        count = count_reply(self.kill_dir)
        if count >= self.due_at and claim_token(self.kill_dir):
            print(f"chaos_worker: reply {count} of the run stored, SIGKILL", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


def _install(fault: _Fault) -> None:
    record_reply = getattr(Store, "record_reply", None)
    append_message = Store.append_message

    if record_reply is not None:  # the reply and its usage in one transaction
        def record_then_die(self: Store, *args: Any, **kwargs: Any) -> int:
            seq = record_reply(self, *args, **kwargs)
            fault.reply_stored()
            return seq

        Store.record_reply = record_then_die  # type: ignore[method-assign]

    def append_then_die(self: Store, card_key: str, message: Any, **kwargs: Any) -> int:
        seq = append_message(self, card_key, message, **kwargs)
        # Releases before the ledger stored model replies through append_message (comments are
        # user messages; today's replies go through record_reply, which does not call it).
        if message.role == "assistant":
            fault.reply_stored()
        return seq

    Store.append_message = append_then_die  # type: ignore[method-assign]


if __name__ == "__main__":
    after = int(os.environ.get("CHAOS_KILL_AFTER_REPLY", "0"))
    if after > 0 and os.environ.get("CHAOS_KILL_DIR"):
        _install(_Fault(Path(os.environ["CHAOS_KILL_DIR"]), after))
    from cardloop.app.cli.main import run

    sys.argv = ["cardloop", "worker", *sys.argv[1:]]
    run()
