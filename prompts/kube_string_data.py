"""A Kubernetes Secret's `stringData`: every value is a secret in plain text, under any key
(`DATABASE_URL`, `.env`, `config.yaml: |` with a whole file below it), so neither the key's name
nor the value's shape can tell it; only where it stands can. The redactor calls this for text
that declares `kind: Secret` (the rule's keywords), and it finds the values of each `stringData`
mapping, in YAML (block style, values plain, quoted or block scalars over several lines) or JSON
(`"stringData": {...}`, pretty or compact, inside a JSON string too: the redactor's view reads
escaped quotes and newlines as the characters they stand for, their backslashes as spaces).

The keys stay, and so does a value that is a template or a variable (`{{ .Values.password }}`,
`${DB_PASSWORD}`): a Helm chart's Secret holds no secret, and the agent may need to edit it.
Linear: each line after a `stringData` key is read once, and a `stringData` inside a mapping
already read is not read again.
"""

from __future__ import annotations

import re

from cardloop.prompts.secret_values import _is_placeholder

_YAML_HEAD = re.compile(r"stringData[ \t]*:[ \t]*(?:#[^\n]*)?\r?(?:\n|\Z)")
# A key, then `:` and what follows it on the line (the value, a block indicator, or nothing).
_KEY_LINE = re.compile(r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s#'\"\-?:,\[\]{}][^\n]*?)[ \t]*:(?:[ \t]+|(?=\r?(?:\n|\Z)))")
_BLOCK = re.compile(r"[|>][1-9+\-]{0,2}[ \t]*(?:#.*)?")
# In the redactor's view a key closed by an escaped quote (`\"stringData\"`) reads `"stringData "`.
_JSON_HEAD = re.compile(r"\"stringData {0,16}\"[ \t]*:[ \t\r\n]*\{")
_JSON_PAIR = re.compile(r"[ \t\r\n]*\"[^\"\n]{0,300}\"[ \t]*:[ \t]*\"")
# A value's closing quote: the first quote after which the mapping goes on or ends.
_JSON_END = re.compile(r"\"(?=[ \t]*(?:[,}\r\n]|$))")
_JSON_NEXT = re.compile(r"[ \t]*,")

Spans = list[tuple[int, int]]


def string_data_values(text: str) -> tuple[Spans, int]:
    """The spans of the `stringData` values in `text`, and how many characters were read."""
    spans: Spans = []
    read = 0
    pos = 0  # a `stringData` before this was inside a mapping already read
    while (i := text.find("stringData", pos)) >= 0:
        if i and text[i - 1] == '"':
            m = _JSON_HEAD.match(text, i - 1)
            end = _json_values(text, m.end(), spans) if m else i + 10
        elif _YAML_HEAD.match(text, i) and text[text.rfind("\n", 0, i) + 1:i].strip(" -") == "":
            end = _yaml_values(text, i, spans)
        else:
            end = i + 10
        read += end - i
        pos = max(end, i + 10)
    return spans, read


def _add(text: str, start: int, end: int, spans: Spans) -> None:
    """The value in `text[start:end]` without the spaces around it (in the redactor's view, the
    backslash of an escaped quote is one: a marker must not take it), unless it is empty or a
    template or variable stands where the value would be."""
    while start < end and text[start] == " ":
        start += 1
    while end > start and text[end - 1] == " ":
        end -= 1
    if start < end and not _is_placeholder(text[start:end], complete=False):
        spans.append((start, end))


def _json_values(text: str, pos: int, spans: Spans) -> int:
    """Reads `"key": "value"` pairs from `pos` (just inside the `{`); returns where it stopped."""
    while m := _JSON_PAIR.match(text, pos):
        start = m.end()
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        close = _JSON_END.search(text, start, line_end)
        if close is None:
            # Nothing up to the line's end closes a value: a `stringData` there is not read
            # again (the search would read the same line once for each).
            return line_end
        _add(text, start, close.start(), spans)
        pos = close.end()
        sep = _JSON_NEXT.match(text, pos)
        if sep is None:
            return pos
        pos = sep.end()
    return pos


def _yaml_values(text: str, head: int, spans: Spans) -> int:
    """Reads the mapping under the `stringData:` key at `head`; returns where it ended."""
    n = len(text)
    indent = head - text.rfind("\n", 0, head) - 1  # the key's column (after `- ` in a list)
    p = text.find("\n", head) + 1 or n
    key_indent = -1
    value: list[int] = []  # [start, end] of the value being read, over several lines
    block = False  # the value is a block scalar: `#` lines in it are text, not comments

    def close() -> None:
        if value:
            _add(text, value[0], value[1], spans)
        value.clear()

    while p < n:
        e = text.find("\n", p)
        e = n if e < 0 else e
        line_end = e
        while line_end > p and text[line_end - 1] in " \t\r":
            line_end -= 1
        first = p
        while first < line_end and text[first] == " ":
            first += 1
        if first == line_end:  # a blank line: neither ends the mapping nor a value
            p = e + 1
            continue
        ind = first - p
        if ind <= indent:
            break
        if key_indent >= 0 and ind > key_indent and (value or block):
            # A line of the value above: a block scalar's, or a plain or quoted one going on.
            if not value:
                value[:] = [first, line_end]
            value[1] = line_end
            p = e + 1
            continue
        if text[first] == "#":
            p = e + 1
            continue
        close()
        block = False
        if key_indent < 0:
            key_indent = ind
        m = _KEY_LINE.match(text, first, line_end)
        if m is not None:
            start = m.end()
            if start >= line_end or _BLOCK.fullmatch(text, start, line_end):
                block = True  # the value is on the lines below
            else:
                value[:] = _one_line_value(text, start, line_end)
        p = e + 1
    close()
    return p


def _one_line_value(text: str, start: int, end: int) -> list[int]:
    """The value that starts at `start` on its line: inside its quotes, or a plain scalar without
    its comment. A quote left open goes on on the lines below (the caller extends it)."""
    quote = text[start]
    if quote in "\"'":
        closing = text.rfind(quote, start + 1, end)
        return [start + 1, closing] if closing > start else [start + 1, end]
    comment = text.find(" #", start, end)
    if comment >= 0:
        end = comment
        while end > start and text[end - 1] in " \t":
            end -= 1
    return [start, end]
