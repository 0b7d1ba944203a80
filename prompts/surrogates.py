"""Lone surrogates: U+D800..U+DFFF on their own are not text.

JSON's `"\\ud800"` escape parses into one (json.loads and every JSON library built on it accept
an unpaired escape), and so do undecodable bytes in a command-line argument (Python's
surrogateescape). No UTF-8 encoder takes them: a string holding one fails wherever it is
written next (a database, an HTTP body, a log line, a provider's request) with a
UnicodeEncodeError far from where it came in. So every entry point refuses such text at the
door, with a message that names the field, and messages about it never echo the raw character.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text`, or None (a valid pair is one character)."""
    found = _SURROGATE.search(text)
    return found.start() if found else None


def printable(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`): safe to encode and log."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def undecodable(name: str, value: str) -> str | None:
    """"NAME: not UTF-8 text (...)" when `value`, read from the environment or argv (undecodable
    bytes arrive as lone surrogates, surrogateescape), is not text; None when it is."""
    index = lone_surrogate(value)
    if index is None:
        return None
    code = ord(value[index])
    byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
    return f"{name}: not UTF-8 text ({byte} at character {index})"


def describe(text: str, index: int) -> str:
    return (f"lone surrogate U+{ord(text[index]):04X} at character {index}: not valid Unicode text "
            "(an unpaired \\u escape?)")


def find_surrogate(value: Any, path: str = "") -> str | None:
    """Where the first lone surrogate sits in a JSON-like value (keys included), as
    "path: problem"; None when there is none."""
    if isinstance(value, str):
        index = lone_surrogate(value)
        return None if index is None else f"{path or 'value'}: {describe(value, index)}"
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{printable(str(key))}" if path else printable(str(key))
            if isinstance(key, str) and (index := lone_surrogate(key)) is not None:
                return f"{where} (a key): {describe(key, index)}"
            if (found := find_surrogate(item, where)) is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if (found := find_surrogate(item, f"{path}.{i}" if path else str(i))) is not None:
                return found
    return None


def refuse_surrogates(value: Any, path: str = "") -> Any:
    """`value` unchanged, or ValueError naming where its first lone surrogate sits."""
    found = find_surrogate(value, path)
    if found is not None:
        raise ValueError(found)
    return value
