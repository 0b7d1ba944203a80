"""JSON and JavaScript strings written with `\\uXXXX` escapes (`"\\u0070assword": "..."`, a value
escaped by an encoder that escapes all but ASCII letters, Go's `\\u0026` for `&`): the redactor
also scans the text with those escapes decoded, and maps what it finds there back onto the
original characters, so the whole escaped secret is replaced."""

from __future__ import annotations

import re

from cardloop.prompts.decoded_lines import View, line_views

# A surrogate pair first, so that an astral character decodes as one; a lone surrogate stays
# escaped (it is no character a rule could match).
_ESCAPE = re.compile(r"\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|\\u([0-9a-f]{4})", re.IGNORECASE)


def _char(m: re.Match[str]) -> str | None:
    if m[3] is not None:
        code = int(m[3], 16)
        return None if 0xD800 <= code <= 0xDFFF else chr(code)
    high, low = int(m[1], 16), int(m[2], 16)
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def unicode_decoded(text: str) -> list[View]:
    """For each run of lines that holds a `\\uXXXX` escape: those lines with their escapes
    decoded, and where each character came from (prompts/decoded_lines.py)."""
    if "\\u" not in text and "\\U" not in text:
        return []
    escapes = ((m.start(), m.end(), char) for m in _ESCAPE.finditer(text) if (char := _char(m)) is not None)
    return line_views(text, escapes)
