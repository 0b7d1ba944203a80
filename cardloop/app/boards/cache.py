"""A small in-memory LRU whose entries also expire, for lookups that a burst of webhooks repeats."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """At most `maxsize` entries, each served for `ttl` seconds after it was stored.

    The clock is injectable so tests can expire entries without sleeping; monotonic by default
    so a wall-clock jump neither keeps stale entries nor drops fresh ones."""

    def __init__(self, maxsize: int = 512, ttl: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if maxsize < 1 or ttl <= 0:
            raise ValueError("TTLCache needs maxsize >= 1 and ttl > 0")
        self.maxsize = maxsize
        self.ttl = ttl
        self._clock = clock
        self._data: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        stored, value = entry
        if self._clock() - stored >= self.ttl:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = (self._clock(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
