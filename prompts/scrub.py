"""Redaction with a digest-keyed cache: every untrusted string passes here on its way
into a prompt, and a warm re-assembly should not rescan text it has already seen."""

from __future__ import annotations

from collections import Counter, OrderedDict

from cardloop.prompts.redact import DEFAULT_REDACTOR, Redactor
from cardloop.prompts.tokens import digest


class Scrubber:
    def __init__(self, redactor: Redactor = DEFAULT_REDACTOR, *, max_entries: int = 50_000) -> None:
        self._redactor = redactor
        self._cache: OrderedDict[bytes, tuple[str, tuple[str, ...]]] = OrderedDict()
        self._max_entries = max_entries

    def scrub(self, text: str, found: Counter[str] | None = None) -> str:
        """Redacted text; rules that fired are added to `found`."""
        if not text:
            return text
        key = digest(text)
        hit = self._cache.get(key)
        if hit is None:
            result = self._redactor.redact(text)
            hit = (result.text, tuple(f.rule for f in result.findings))
            self._cache[key] = hit
            if len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        if found is not None:
            found.update(hit[1])
        return hit[0]
