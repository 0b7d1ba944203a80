"""URL-encoded text (`?next=https%3A%2F%2Fbob%3Apw%40db%2F`, `password%3Dpw` in a redirect or
an access log): the redactor also scans the lines with percent escapes of URL syntax decoded,
and maps what it finds there back onto the original characters."""

from __future__ import annotations

import re

from cardloop.prompts.decoded_lines import View, line_views

# The escapes that carry a URL's or an assignment's syntax; a secret's own characters are
# letters and digits, which are never escaped.
_ESCAPE = re.compile(r"%(2[0236BbFf]|3[AaDdFf]|40|5[Cc])")
_HINT = re.compile(r"%(?:3[AaDd]|40)")  # `:`, `=` or `@` escaped: a credential's syntax can hide


def percent_decoded(text: str) -> list[View]:
    """For each run of lines with escapes of URL syntax, when the text holds an escaped `:`, `=`
    or `@` at all: those lines decoded, and where each character came from
    (prompts/decoded_lines.py)."""
    if "%" not in text or _HINT.search(text) is None:
        return []
    return line_views(text, ((m.start(), m.end(), chr(int(m[1], 16))) for m in _ESCAPE.finditer(text)))
