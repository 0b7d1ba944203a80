"""Provider answers received on this worker but not yet stored, kept in memory by call key.

A model call's answer is billed by the provider the moment it is sent. When the store cannot
take it (down longer than the attempt waits it out, activities/heartbeat.py), the attempt fails
and Temporal retries it; without this, the retry called the model again (billed twice) and
the first attempt's ledger row stayed "calling" with zero usage. So `billed_call` keeps each
answer here, with its settled ledger row, until the caller has recorded it; a retried attempt
on this worker finds it and records THAT instead of calling again (its row, the original
attempt's, is settled by the record). Once recorded the entry is dropped. Bounded: the oldest
entries go first, and an entry older than MAX_AGE is never used (a worker that restarted has
none: the model is then called again, as before)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

MAX_ENTRIES = 512
MAX_AGE = 3600.0


class ReceivedReplies:
    def __init__(self, *, max_entries: int = MAX_ENTRIES, max_age: float = MAX_AGE) -> None:
        self._entries: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries, self.max_age = max_entries, max_age

    def put(self, card_key: str, call_key: str, value: Any) -> None:
        with self._lock:
            self._entries[(card_key, call_key)] = (time.monotonic(), value)
            self._entries.move_to_end((card_key, call_key))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def get(self, card_key: str, call_key: str) -> Any | None:
        with self._lock:
            found = self._entries.get((card_key, call_key))
            if found is None:
                return None
            if time.monotonic() - found[0] > self.max_age:
                del self._entries[(card_key, call_key)]
                return None
            return found[1]

    def discard(self, card_key: str, call_key: str) -> None:
        with self._lock:
            self._entries.pop((card_key, call_key), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
