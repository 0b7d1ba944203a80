"""Credentials in delimited text, where no `=` or `:` marks a value: a CSV (or `;`- or
tab-separated) table under a header that names a credential column (`username,password` then
`bob,Xk9...`, an export of logins, a test fixture), and a line that is only a credential key and
its value (`db_password,Xk9...`, a spreadsheet of settings saved as CSV).

A header is a line of two or more fields that are all names or labels (`api_key`, `User Name`); its
columns whose last word is a credential noun (`password`, `token`, `secret`...) hold literals, each
judged as a quoted assignment's value (8 characters at least, no placeholder, no code name such as
`refresh_token`), on every following line with the header's number of fields (a blank line or
prose ends the table; a field in double quotes may hold the delimiter, as RFC 4180 writes it). A
cell that is a plain word goes only under a login export's password column (three fields or more,
one of them a user's). A lone `key,value` line asks more of its value, as nothing says it is a
table: a random run, or digits among both cases at a random's entropy.

Linear: the text is searched once for a credential word that ends a field, and each line is read
as a header or a row at most once.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator

from cardloop.prompts.secret_values import (
    _NAME,
    _assigned_value_ok,
    _char_kinds,
    _has_random_run,
    _is_code_name,
    _looks_random,
    _strength,
)

# A credential noun that ends a field: before a delimiter or the line's end (maybe after a quote).
_FIELD_END = r"[\"']?[ \t]*(?=[,;\t]|\r?\n|\Z)"
_NOUNS = (r"pass(?:w(?:or)?d|phrase)?", "pwd", "secret", "token", r"cred(?:s|entials?)", "psk", "key")
_FIELD_END_WORD = re.compile("(?i:" + "|".join(_NOUNS) + ")" + _FIELD_END)
# The same, one pattern per noun over the lowercased text: each starts with a literal, which `re`
# finds by a fast search; one case-insensitive alternation tries every position of the text.
_FIELD_END_WORDS = tuple(re.compile(n + _FIELD_END) for n in _NOUNS)


def _hits(text: str, lowered: str | None) -> Iterator[re.Match[str]]:
    """The credential nouns that end a field, in order of position in `text` (`lowered`: its
    same-length lowercase, when the caller has it)."""
    if lowered is None:
        lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lowercase is longer: positions would shift
        return _FIELD_END_WORD.finditer(text)
    return heapq.merge(*(p.finditer(lowered) for p in _FIELD_END_WORDS), key=lambda m: m.start())
# A header's field: a name or a label of words.
_LABEL = re.compile(r"[A-Za-z][\w .\-]{0,60}")
_DELIMITERS = (",", ";", "\t")
# Longer lines are no header a person or a tool writes; bounded reads per line.
_MAX_LINE = 2000
_MAX_FIELDS = 64


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _quoted_end(text: str, a: int, end: int, delim: str) -> int:
    """Where the field quoted by the `"` at `text[a]` closes (the closing quote's index), when
    it closes on the line and only blanks stand between it and the delimiter or the line's end
    (RFC 4180: inside, `""` is a quote, and the delimiter is a character of the value); else -1."""
    pos = a + 1
    while True:
        close = text.find('"', pos, end)
        if close < 0:
            return -1
        if close + 1 < end and text[close + 1] == '"':
            pos = close + 2  # an escaped quote
            continue
        after = close + 1
        while after < end and text[after] in " \t\r" and text[after] != delim:
            after += 1
        return close if after == end or text[after] == delim else -1


def _cells(text: str, start: int, end: int, delim: str) -> list[tuple[int, int]]:
    """Each field's span on the line `text[start:end]`, without surrounding blanks, quotes and `\r`.
    A field in double quotes may hold the delimiter (`bob,"p,4ss;W0rd",db1`: three fields)."""
    spans, pos = [], start
    while True:
        a = pos
        while a < end and text[a] in " \t" and text[a] != delim:  # (a tab may be the delimiter)
            a += 1
        close = _quoted_end(text, a, end, delim) if a < end and text[a] == '"' else -1
        nxt = text.find(delim, close if close >= 0 else pos, end)
        stop = end if nxt < 0 else nxt
        if close >= 0:
            spans.append((a + 1, close))
        else:
            b = stop
            while b > a and text[b - 1] in " \t\r":
                b -= 1
            if b - a >= 2 and text[a] == text[b - 1] and text[a] in "\"'":
                a, b = a + 1, b - 1
            spans.append((a, b))
        if nxt < 0 or len(spans) > _MAX_FIELDS:
            return spans
        pos = nxt + 1


def _line_start(text: str, start: int) -> int:
    """`start` itself when the line has no indentation: a header starts its line, as a file or a
    tool writes it (code that looks like one, `yield before, orig_token`, is indented)."""
    return start if start >= len(text) or text[start] not in " \t" else -1


def _header_field(text: str, a: int, name: str) -> bool:
    """A header's field is a name (`api_key`, `login_password`); a label of words (`"Login
    Name"`, KeePass's) only in quotes, where code puts no names."""
    if not _LABEL.fullmatch(name) or not _is_code_name(name.replace(" ", "_")):
        return False
    return " " not in name or (a > 0 and text[a - 1] in "\"'")


def _random_value(value: str) -> bool:
    has_digit, _, has_upper, has_lower = _char_kinds(value)
    return (has_digit and has_upper and has_lower and _looks_random(value)) or _has_random_run(value)


def _literal_ok(column: str, value: str, *, login_export: bool = False) -> bool:
    """A cell under a credential column: a literal (`_assigned_value_ok`) that is no plain word
    either (a digit, both cases or a symbol among letters): SQL's `SELECT username, password` then
    `FROM users, accounts` has the header's shape, and `accounts` is a table. Under a login
    export's password column (`_login_export`) a plain word goes too: it is someone's password."""
    if not value or any(c.isspace() for c in value) or not _assigned_value_ok(2, column, value, quoted=True):
        return False
    has_digit, has_alpha, has_upper, has_lower = _char_kinds(value)
    return has_alpha and (login_export or has_digit or (has_upper and has_lower) or not value.isalnum())


# A login export's columns: a user's (`user`, `username`, `login`, `email`, `db_user`, `User Name`)
# and a password's (`password`, `db_pass`, `passwd`, `pwd`, `passphrase`).
_USER_COLUMN = re.compile(r"(?i:(?:.*[_ .\-])?(?:user(?:[_ .\-]?name)?|login(?:[_ .\-]?name)?|e-?mail|account))")
_PASSWORD_COLUMN = re.compile(r"(?i:(?:.*[_ .\-])?(?:pass(?:w(?:or)?d|phrase)?|pwd))")


def _login_export(names: list[str], column: int) -> bool:
    """The column is clearly a password column: a password's name, in a header of three fields or
    more that also names a user (`user,password,host`, a password manager's or a database's export).
    Two fields alone (`username,password` then `bob,sunshine`) are as often a form's or a doc's
    example; there a plain word stays."""
    return (len(names) >= 3 and _PASSWORD_COLUMN.fullmatch(names[column]) is not None
            and any(_USER_COLUMN.fullmatch(n) for i, n in enumerate(names) if i != column))


def csv_credentials(text: str, lowered: str | None = None) -> tuple[list[tuple[int, int]], int]:
    """The spans of credential cells in `text`, and how many characters were read."""
    spans: list[tuple[int, int]] = []
    read = 0
    done = -1  # the text up to here (a line's end) was read already: one line's hits read it once
    for hit in _hits(text, lowered):
        if hit.start() <= done:
            continue
        end = _line_end(text, hit.end())
        done = end
        start = text.rfind("\n", max(0, hit.start() - _MAX_LINE - 1), hit.start()) + 1
        if end - start > _MAX_LINE or (start == 0 and hit.start() > _MAX_LINE):
            continue
        line = text[start:end]
        delim = next((d for d in _DELIMITERS if d in line), None)
        if delim is None:
            continue
        read += end - start
        cells = _cells(text, start, end, delim)
        names = [text[a:b] for a, b in cells]
        if start == _line_start(text, start) and len(cells) >= 2 and all(
                _header_field(text, a, n) for (a, _), n in zip(cells, names, strict=True)):
            columns = [(i, _login_export(names, i)) for i, n in enumerate(names) if _strength(n) == 2]
            if columns:
                last_row_end, rows_read = _table_rows(text, end, delim, names, columns, spans)
                read += rows_read
                done = max(done, last_row_end)
            continue
        # `db_password,Xk9...`: a key and its value alone on a line (with a tab, a .properties line:
        # `generic-assignment` has it).
        if delim != "\t" and len(cells) == 2 and _NAME.fullmatch(names[0]) and _strength(names[0]) == 2 \
                and not any(c.isspace() for c in names[1]) and len(names[1]) >= 8 and _random_value(names[1]):
            spans.append(cells[1])
    return spans, read


def _table_rows(text: str, header_end: int, delim: str, names: list[str], columns: list[tuple[int, bool]],
                spans: list[tuple[int, int]]) -> tuple[int, int]:
    """The rows below a header, each of its number of fields: their credential cells go to
    `spans`. Returns where the last row ends (the header's end when none) and the characters
    read; the line that ended the table is left to be read again (it may start a table)."""
    pos, read, last = header_end + 1, 0, header_end
    while pos < len(text):
        end = _line_end(text, pos)
        if end - pos > _MAX_LINE:
            break
        cells = _cells(text, pos, end, delim)
        read += end - pos + 1
        if len(cells) != len(names):
            break
        for i, login_export in columns:
            a, b = cells[i]
            if _literal_ok(names[i], text[a:b], login_export=login_export):
                spans.append((a, b))
        last, pos = end, end + 1
    return last, read
