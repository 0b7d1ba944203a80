"""The exact token count of a multi-line text from the counts of its lines, for encodings whose
pre-tokenizer splits at line starts (tokens.LINE_SPLITTING_ENCODINGS: cl100k_base).

Why: an excerpt of a log is measured line by line while it is searched for (context.py's
LineSumCounter, an upper bound), and the excerpt chosen was then tokenized whole for its exact
count: a second pass over every line sent (25,000 characters of the benchmark's 105,000-character
prompt). Its lines' counts are known by then; the exact count follows from them.

Why it is exact. cl100k_base's pre-tokenizer (`'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|
\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s`) cuts text into pieces
and BPE merges only within a piece, so a text's count is the sum of its pieces'. A piece holding
a newline ends at the last newline of its whitespace run, or, after punctuation, at the last of
the newlines that follow it; neither reaches past a newline followed by spaces or tabs and then
a visible character. So a text cut after such newlines counts the sum of its parts ("segments").
Within a segment "L\\n" only L's last piece meets the newline: it is L's trailing run of spaces
and tabs, or its trailing punctuation (with one space before it, which ` ?` takes), or nothing
when L ends with a letter or digit. So count(L + "\\n") = count(L) - count(tail) + count(tail +
"\\n"), and tails are few and short ("", ")", ":", " {"). Anything less plain (a segment of
several lines, a tail with a non-ASCII or control character, where Unicode classes would have to
agree with the tokenizer's) is tokenized as it is: rarer, never wrong.
tests/prompts/test_line_tokens.py checks all of it against the tokenizer.
"""

from __future__ import annotations

import string
from collections.abc import Callable

# ASCII punctuation: never \s, \p{L} or \p{N} in any Unicode version.
_PUNCT = frozenset(string.punctuation)
_PUNCT_CHARS = string.punctuation
_BLANK = " \t"

Count = Callable[[str], int]


def _starts_segment(line: str) -> bool:
    """Whether a piece may start at the start of `line` (after a newline): spaces or tabs, then a
    visible character. (str.isspace holds for every \\s character, and a few more.)"""
    rest = line.lstrip(_BLANK)
    return bool(rest) and not rest[0].isspace()


def _tail(line: str) -> str | None:
    """The last piece of `line` that a following newline would join, "" when none would, or None
    when that is not certain from ASCII alone."""
    last = line[-1:]
    if not last or not last.isascii():
        return None
    if last.isalnum():
        return ""
    if last in _BLANK:
        head = line.rstrip(_BLANK)
        if head and head[-1].isspace():  # another kind of whitespace continues the run
            return None
        return line[len(head):]
    if last in _PUNCT:
        head = line.rstrip(_PUNCT_CHARS)
        before = head[-1:]
        if not before:
            return line
        if before == " ":
            return line[len(head) - 1:]
        if before == "\t" or (before.isascii() and before.isalnum()):
            return line[len(head):]
    return None


def exact_raw(text: str, line_raw: Count, raw: Count, tails: dict[str, int] | None = None) -> int:
    """The tokenizer's count of `text`, as `raw(text)` would give it (a LINE_SPLITTING encoding).

    `line_raw(line)` counts one line (the caller's memo of lines already counted); `raw` counts
    any other text (segments of several lines, tails); `tails` keeps what a newline adds after
    each tail (a few distinct ones serve a whole log: kept across calls by the caller)."""
    tails = {} if tails is None else tails
    lines = text.split("\n")
    last = len(lines) - 1
    total = 0
    start = 0
    for k in range(last + 1):
        if k < last:
            first = lines[k + 1][:1]
            if not first or (first.isspace() and not _starts_segment(lines[k + 1])):
                continue  # the next line joins this segment
        if start < k:  # several lines: counted as they stand
            total += raw("\n".join(lines[start:k + 1]) + ("\n" if k < last else ""))
        elif k == last:
            total += line_raw(lines[k])
        else:
            line = lines[k]
            end = line[-1:]
            tail = "" if end.isalnum() and end.isascii() else _tail(line)
            if tail is None:
                total += raw(line + "\n")
            else:
                added = tails.get(tail)
                if added is None:
                    added = tails[tail] = raw(tail + "\n") - (raw(tail) if tail else 0)
                total += line_raw(line) + added
        start = k + 1
    return total
