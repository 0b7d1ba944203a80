"""Run a blocking call while the activity keeps heartbeating.

Temporal learns that a worker died only through missed heartbeats; a model call can take
minutes, so the call runs on a helper thread while the activity thread heartbeats."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="cardloop-call")


def call_with_heartbeat(fn: Callable[[], T], *, every: float = 3.0, detail: str = "") -> T:
    future = _POOL.submit(fn)
    while True:
        try:
            return future.result(timeout=every)
        except concurrent.futures.TimeoutError:
            if activity.in_activity():
                activity.heartbeat(detail)
