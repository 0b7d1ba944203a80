"""Run a blocking call while the activity keeps heartbeating; the store, always so.

Temporal learns that a worker died only through missed heartbeats. A model call can take
minutes, and a store call can wait on SQLite's busy timeout (30 s) while another process
holds the write lock: an activity that stops heartbeating then looks dead, and Temporal starts
another attempt while the first still waits. So such calls run on a helper thread while the
activity thread heartbeats, and every store call an activity makes goes through
`HeartbeatingStore` (ActivityDeps wraps its store in one). A store that stays unavailable ends
the attempt with the typed, retryable "StoreUnavailable" error ("store unavailable: database
is locked"), which a failed stage reports as its reason."""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from cardloop.contracts import names
from cardloop.store import StoreUnavailable

T = TypeVar("T")
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


class HeartbeatingStore:
    """The Store as activities see it: each method call runs under `call_with_heartbeat`
    (heartbeats while the database makes it wait), attributes pass through."""

    def __init__(self, store: Any) -> None:
        self.inner = store

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return call_with_heartbeat(lambda: attr(*args, **kwargs), every=1.0, pool=_STORE_POOL,
                                       detail=f"waiting for the store ({name})")

        return call
