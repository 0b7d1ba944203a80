"""A regular expression compiled on first use.

The redaction rules hold some 250 patterns; compiling them all at import cost every command
that imports the redactor (the store does, for its blobs) about 50 ms, though most commands
redact nothing or a short text that opens a few rules. A rule's pattern is compiled when a
text first opens its rule (prompts/redact.py); a worker that redacts much pays each compile
once, as before.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

# Global inline flags at the start (`(?i)`, as gitleaks' patterns write them): a compiled
# pattern's `flags` include them, and the gates read `flags` without compiling
# (prompts/rule_gates.py), so they are read here too.
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_FLAG_LETTERS = {"a": re.ASCII, "i": re.IGNORECASE, "L": re.LOCALE, "m": re.MULTILINE, "s": re.DOTALL,
                 "u": re.UNICODE, "x": re.VERBOSE}


class LazyPattern:
    """Stands for `re.compile(pattern, flags)`: `pattern` and `flags` read as a compiled
    pattern's do, without compiling; any other attribute compiles it once. A hot loop takes
    `compiled()` once rather than a method per call through `__getattr__`."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        pos = 0
        while (inline := _GLOBAL_FLAGS.match(pattern, pos)) is not None:
            for letter in inline[1]:
                flags |= _FLAG_LETTERS[letter]
            pos = inline.end()
        self.pattern = pattern
        # As a compiled str pattern reports them: re.UNICODE unless ASCII or LOCALE.
        self.flags = int(flags if flags & (re.ASCII | re.LOCALE) else flags | re.UNICODE)
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        found = self._compiled
        if found is None:  # two threads may both compile: the same pattern, either one kept
            found = self._compiled = re.compile(self.pattern, self.flags)
        return found

    @property
    def is_compiled(self) -> bool:
        return self._compiled is not None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compiled(), name)

    # The common calls spelled out, for readers and type checkers.
    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().match(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().search(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().fullmatch(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(string, pos, endpos)

    # Equal as compiled patterns are: the same source and flags.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyPattern | re.Pattern):
            return (self.pattern, self.flags) == (other.pattern, other.flags)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"


Pattern = re.Pattern[str] | LazyPattern


def compiled(pattern: Pattern) -> re.Pattern[str]:
    """`pattern` compiled (now, if it is lazy and was not yet)."""
    return pattern.compiled() if isinstance(pattern, LazyPattern) else pattern
