"""Run a blocking call while the activity keeps heartbeating; the store, always so.

Temporal learns that a worker died only through missed heartbeats. A model call can take
minutes, and a store call can wait on SQLite's busy timeout (30 s) while another process
holds the write lock: an activity that stops heartbeating then looks dead, and Temporal starts
another attempt while the first still waits. So such calls run on a helper thread while the
activity thread heartbeats, and every store call an activity makes goes through
`HeartbeatingStore` (ActivityDeps wraps its store in one).

A store that is briefly unavailable (PostgreSQL restarting or failing over, SQLite locked past
its busy timeout) is waited out inside the attempt: the call is tried again with backoff for
up to STORE_PATIENCE seconds (never past the attempt's own start-to-close timeout), heartbeating
meanwhile. The store's writes are idempotent (dedup keys, call keys), so trying a call again
that may have committed is safe. Why inside the attempt: an activity's retry policy may allow
few attempts (a tool call has 3, 1 s apart), which a few seconds' outage used up, failing the
stage. Local activities are not held: their own short timeout and retry policy decide. A store
that stays unavailable ends the attempt with the typed, retryable "StoreUnavailable" error
("store unavailable: database is locked"), which a failed stage reports as its reason."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from cardloop.contracts import names
from cardloop.store import StoreUnavailable

T = TypeVar("T")
_log = logging.getLogger(__name__)
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="cardloop-call")
# Store calls get threads of their own: they must not queue behind minutes-long model calls.
_STORE_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="cardloop-store")


def call_with_heartbeat(fn: Callable[[], T], *, every: float = 3.0, detail: str = "",
                        pool: concurrent.futures.Executor = _POOL, stop: threading.Event | None = None) -> T:
    """`fn()` on a helper thread while this one heartbeats. When the activity is cancelled (the
    SDK raises CancelledError in this thread, after a heartbeat brought the request) or the
    worker shuts down, `stop` is set, so that work which watches it (a sandboxed command) is
    killed rather than left running for a stage that ended; its end is awaited (STOP_WAIT
    seconds at most) before the cancellation goes on."""
    future = pool.submit(fn)
    try:
        while True:
            try:
                return future.result(timeout=every)
            except concurrent.futures.TimeoutError:
                # A local activity has no heartbeat: its own timeout bounds it (the workflow decides).
                if activity.in_activity() and not activity.info().is_local:
                    activity.heartbeat(detail)
            except StoreUnavailable as err:
                raise ApplicationError(str(err), type=names.STORE_UNAVAILABLE) from None
    except CancelledError:
        if stop is not None:
            stop.set()
            concurrent.futures.wait([future], timeout=STOP_WAIT)
        raise


STOP_WAIT = 10.0


# How long a store call of an activity waits out an unavailable store before the attempt fails.
STORE_PATIENCE = 90.0
# Time left at the end of an attempt's start-to-close timeout for the attempt to report.
_MARGIN = 2.0
_FIRST_DELAY, _MAX_DELAY = 0.2, 5.0


def store_patience(limit: float = STORE_PATIENCE) -> float:
    """How long this activity's store calls may wait out an unavailable store: `limit`, less
    when the attempt's start-to-close timeout comes sooner; 0 outside an activity and in a
    local activity (whose own short timeout and retry policy decide)."""
    if not activity.in_activity():
        return 0.0
    info = activity.info()
    if info.is_local:
        return 0.0
    if info.start_to_close_timeout is not None:
        started = info.started_time if info.started_time.tzinfo else info.started_time.replace(tzinfo=UTC)
        left = (started + info.start_to_close_timeout - datetime.now(UTC)).total_seconds() - _MARGIN
        limit = min(limit, left)
    return max(0.0, limit)


def retry_unavailable(fn: Callable[[], T], *, patience: float, stop: threading.Event | None = None,
                      what: str = "store call") -> T:
    """`fn()`, tried again with backoff while it raises StoreUnavailable, for `patience` seconds
    at most (or until `stop` is set); then the last StoreUnavailable is raised."""
    deadline = time.monotonic() + patience
    delay = _FIRST_DELAY
    while True:
        try:
            return fn()
        except StoreUnavailable as err:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                raise
            _log.warning("%s: %s; trying again in %.1f s (%.0f s of patience left)", what, err, min(delay, left), left)
            if stop is not None:
                if stop.wait(min(delay, left)):
                    raise
            else:
                time.sleep(min(delay, left))
            delay = min(delay * 2, _MAX_DELAY)


class HeartbeatingStore:
    """The Store as activities see it: each method call runs under `call_with_heartbeat`
    (heartbeats while the database makes it wait, and while an unavailable store is waited
    out: `retry_unavailable`), attributes pass through."""

    def __init__(self, store: Any, *, patience: float = STORE_PATIENCE) -> None:
        self.inner = store
        self.patience = patience

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            patience = store_patience(self.patience)  # read here: the activity's context is this thread's
            stop = threading.Event()
            return call_with_heartbeat(
                lambda: retry_unavailable(lambda: attr(*args, **kwargs), patience=patience, stop=stop,
                                          what=f"store.{name}"),
                every=1.0, pool=_STORE_POOL, stop=stop, detail=f"waiting for the store ({name})")

        return call
