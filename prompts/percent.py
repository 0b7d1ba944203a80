"""URL-encoded text (`?next=https%3A%2F%2Fbob%3Apw%40db%2F`, `password%3Dpw` in a redirect or
an access log): the redactor also scans the text with its percent escapes of URL syntax
decoded, and maps what it finds there back onto the original characters."""

from __future__ import annotations

import re

# The escapes that carry a URL's or an assignment's syntax; a secret's own characters are
# letters and digits, which are never escaped.
_ESCAPE = re.compile(r"%(2[0236BbFf]|3[AaDdFf]|40|5[Cc])")
_HINT = re.compile(r"%(?:3[AaDd]|40)")  # `:`, `=` or `@` escaped: a credential's syntax can hide


def percent_decoded(text: str) -> tuple[str, list[int]] | None:
    """(the text with those escapes decoded, the original offset of each decoded character
    and of its end), or None when the text holds no escaped `:`, `=` or `@`."""
    if "%" not in text or _HINT.search(text) is None:
        return None
    parts: list[str] = []
    where: list[int] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        parts.append(text[pos:m.start()])
        where.extend(range(pos, m.start()))
        parts.append(chr(int(m[1], 16)))
        where.append(m.start())
        pos = m.end()
    parts.append(text[pos:])
    where.extend(range(pos, len(text) + 1))  # ... and the end of the text
    return "".join(parts), where
