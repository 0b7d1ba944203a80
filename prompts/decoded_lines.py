"""Views of a text with some escapes decoded (percent escapes of URL syntax, `\\uXXXX`), one view
per run of lines that holds them, each with the map from its characters back to the original
offsets. Only those lines: a few escapes in a large text (a log quoting one JSON line or one
redirect URL) must not make the redactor read the whole text twice. A secret and its key share
a line, in JSON pretty-printed or not, in a URL, in an assignment."""

from __future__ import annotations

from collections.abc import Iterable

View = tuple[str, list[int]]  # (the decoded lines, the original offset of each character and of the end)


def line_views(text: str, escapes: Iterable[tuple[int, int, str]]) -> list[View]:
    """`escapes`: (start, end, the character it stands for), in order, not overlapping."""
    views: list[View] = []
    parts: list[str] = []
    where: list[int] = []
    line_end = -1  # the end of the current view's last line
    pos = 0
    for start, end, char in escapes:
        if start > line_end:  # a new view, from the start of this escape's line
            if parts:
                parts.append(text[pos:line_end])
                where.extend(range(pos, line_end + 1))
                views.append(("".join(parts), where))
            pos = text.rfind("\n", 0, start) + 1
            parts, where = [], []
            # Once a line (an escape holds no line break, so the next escape on this line ends
            # it too): looked up after every escape, it read the rest of the text each time,
            # quadratic on one long line of escapes.
            found = text.find("\n", start)
            line_end = len(text) if found < 0 else found
        parts.append(text[pos:start])
        where.extend(range(pos, start))
        parts.append(char)
        where.append(start)
        pos = end
    if parts:
        parts.append(text[pos:line_end])
        where.extend(range(pos, line_end + 1))  # ... and the view's end
        views.append(("".join(parts), where))
    return views
