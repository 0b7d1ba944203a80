"""Log and file excerpts kept across assemblies, bounded by entries and by the text they hold.

A log cut to the same size for the next turn is cut once (excerpting measures many candidate
cuts). Bounded by entries alone (2,000), a worker that met many cards kept every card's excerpt
until the two-thousandth: bench/assemble_memory.py grew by its build logs' excerpts (about 9 KB a
card there, up to a context budget's worth each) long after every other cache was full. By
characters it keeps at most `max_chars` of excerpt text; oldest first out, as MessageCache does.
"""

from __future__ import annotations

from collections import OrderedDict

from cardloop.prompts.logs import Excerpt

ExcerptKey = tuple[bytes, int, bool, float]  # text digest, token target, is a log, calibration


class ExcerptCache:
    def __init__(self, max_entries: int = 2_000, max_chars: int = 4_000_000) -> None:
        if max_entries < 1 or max_chars < 0:
            raise ValueError(f"ExcerptCache: max_entries ({max_entries}) must be >= 1 and max_chars ({max_chars}) >= 0")
        self._entries: OrderedDict[ExcerptKey, Excerpt] = OrderedDict()
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self.evictions = 0  # entries pushed out by a bound: nonzero once the cache is full

    def get(self, key: ExcerptKey) -> Excerpt | None:
        return self._entries.get(key)

    def put(self, key: ExcerptKey, excerpt: Excerpt) -> None:
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.chars -= len(old.text)
        if len(excerpt.text) > self.max_chars // 16:
            return  # it would push out everything else; one assembly reads it once
        entries[key] = excerpt
        self.chars += len(excerpt.text)
        while len(entries) > self.max_entries or self.chars > self.max_chars:
            self.chars -= len(entries.popitem(last=False)[1].text)
            self.evictions += 1

    def __len__(self) -> int:
        return len(self._entries)
