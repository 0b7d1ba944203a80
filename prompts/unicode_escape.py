"""JSON and JavaScript strings written with `\\uXXXX` escapes (`"\\u0070assword": "..."`, a value
escaped by an encoder that escapes all but ASCII letters, Go's `\\u0026` for `&`): the redactor
also scans the text with those escapes decoded, and maps what it finds there back onto the
original characters, so the whole escaped secret is replaced."""

from __future__ import annotations

import re

# A surrogate pair first, so that an astral character decodes as one; a lone surrogate stays
# escaped (it is no character a rule could match).
_ESCAPE = re.compile(r"\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|\\u([0-9a-f]{4})", re.IGNORECASE)


def _char(m: re.Match[str]) -> str | None:
    if m[3] is not None:
        code = int(m[3], 16)
        return None if 0xD800 <= code <= 0xDFFF else chr(code)
    high, low = int(m[1], 16), int(m[2], 16)
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def unicode_decoded(text: str) -> list[tuple[str, list[int]]]:
    """For each run of lines that holds a `\\uXXXX` escape: (those lines with their escapes
    decoded, the original offset of each decoded character and of its end). Only those lines:
    a few escapes in a large text (a log quoting one JSON line) must not make the redactor
    read the whole text twice. A JSON key and its value share a line, pretty-printed or not."""
    if "\\u" not in text and "\\U" not in text:
        return []
    views: list[tuple[str, list[int]]] = []
    parts: list[str] = []
    where: list[int] = []
    line_end = -1  # the end of the current window's last line
    pos = 0
    for m in _ESCAPE.finditer(text):
        char = _char(m)
        if char is None:
            continue
        if m.start() > line_end:  # a new window, from the start of this escape's line
            if parts:
                parts.append(text[pos:line_end])
                where.extend(range(pos, line_end + 1))
                views.append(("".join(parts), where))
            pos = text.rfind("\n", 0, m.start()) + 1
            parts, where = [], []
        parts.append(text[pos:m.start()])
        where.extend(range(pos, m.start()))
        parts.append(char)
        where.append(m.start())
        pos = m.end()
        found = text.find("\n", pos)
        line_end = len(text) if found < 0 else found
    if parts:
        parts.append(text[pos:line_end])
        where.extend(range(pos, line_end + 1))  # ... and the window's end
        views.append(("".join(parts), where))
    return views
