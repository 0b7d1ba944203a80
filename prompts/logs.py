"""Excerpting long logs and long text to a token target.

A build log or pod log is read the way a developer reads it: the first lines (which job,
which image, which command), the last lines (how it ended) and the lines around the errors.
`excerpt_log` keeps exactly those, joined by one-line markers that say how much was cut:

    <head lines>
    [... 1,234 lines cut ...]
    <lines before an error>
    <the error line, or a whole Python traceback / Go panic block>
    <lines after it>
    [... 310 lines cut ...]
    <tail lines>

When that is still too long it shrinks step by step: less context, a smaller head and tail,
shorter traceback blocks, then fewer error windows - first those that only say that something
failed ("exit code 1", npm's lifecycle lines), then plain error lines, then tracebacks and
panics, each time the farthest from the end first, because the last error is usually the real
one. As a last resort the most telling line is cut by characters. `excerpt_text` does the same
for text that is not a log (source files, docs): head and tail lines around one marker.
Which lines are errors is log_errors.py's rule table; the size search is token_fit.py's.

Token counting is injected (`Counter`), so this module stays pure. Counting a large text is
the expensive part (tiktoken takes about 90 ms per MB, several times that on long runs of one
character), so the search counts only candidates of about the target size: a handful of calls
per excerpt, and a multi-megabyte log is never counted whole when it cannot possibly fit.
Measured: a 5 MB GitHub Actions log excerpts in about 0.15 s, a 5 MB log of nothing but error
lines in about 0.5 s, with 5 to 7 count() calls of at most ~30,000 characters each.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from cardloop.prompts.log_errors import Span, error_spans, find_error_lines, line_body
from cardloop.prompts.token_fit import (
    Budget,
    Counter,
    bisect_max,
    char_cut,
    chars_per_token,
    cut_line,
    fits_unchanged,
    largest,
)

__all__ = ["Counter", "Excerpt", "excerpt_log", "excerpt_text", "find_error_lines", "merge_ranges", "strip_ansi"]

# Terminal control sequences (colours, cursor moves): CSI, then parameters, then the final letter.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """A log as a person reads it on a terminal: without `\\x1b[32m`-style colour codes, which
    cost tokens and say nothing an excerpt needs (the whole log, kept as a blob, keeps them)."""
    return _ANSI.sub("", text) if "\x1b" in text else text

# Head and tail of the standard plan; a roomy budget keeps more, a tight one less.
HEAD_LINES = 10
TAIL_LINES = 30



def _lines_marker(n: int) -> str:
    return f"[... {n:,} line{'' if n == 1 else 's'} cut ...]"


@dataclass(frozen=True)
class Excerpt:
    """An excerpt and what it kept; `describe()` is the line `explain` shows."""

    text: str
    cut: bool
    total_lines: int
    kept_lines: int
    # 1-based line numbers (in the original text) of the error lines that were kept.
    error_lines: tuple[int, ...] = ()
    head_lines: int = 0
    tail_lines: int = 0
    error_windows: int = 0
    # Characters removed by the last-resort character cut, on top of the line cut.
    chars_cut: int = 0

    def describe(self) -> str:
        if not self.cut:
            return f"kept all {self.total_lines:,} lines"
        if not self.text:
            return f"kept nothing of {self.total_lines:,} lines: not even a marker fits"
        parts = []
        if self.head_lines:
            parts.append(f"head {self.head_lines:,}")
        if self.tail_lines:
            parts.append(f"tail {self.tail_lines:,}")
        if self.error_windows:
            s = "" if self.error_windows == 1 else "s"
            parts.append(f"{self.error_windows:,} error window{s}")
        if self.chars_cut:
            parts.append(f"{self.chars_cut:,} chars cut")
        detail = f": {', '.join(parts)}" if parts else ""
        return f"kept {self.kept_lines:,} of {self.total_lines:,} lines{detail}"


# --- rendering kept line ranges ------------------------------------------------------------


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open ranges, sorted and coalesced where they touch."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _within(ranges: list[tuple[int, int]], k: int) -> bool:
    i = bisect.bisect_right(ranges, (k, math.inf)) - 1
    return i >= 0 and ranges[i][0] <= k < ranges[i][1]


def _render(lines: Sequence[str], kept: list[tuple[int, int]], line_cap: int | None) -> str:
    parts: list[str] = []
    pos = 0
    for a, b in kept:
        if a > pos:
            parts.append(_lines_marker(a - pos))
        for line in lines[a:b]:
            parts.append(line if line_cap is None else cut_line(line, line_cap))
        pos = b
    if pos < len(lines):
        parts.append(_lines_marker(len(lines) - pos))
    return "\n".join(parts)


def _split(text: str) -> list[str]:
    # "\n" only: str.splitlines() also splits on \x0c, \x1c and friends, which would
    # disagree with the line numbers an editor or the CI UI shows.
    return (text[:-1] if text.endswith("\n") else text).split("\n")


# --- excerpt_log ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    head: int
    tail: int
    before: int  # context lines before each error span
    after: int
    span_cap: int  # lines kept of a long block besides its keys and first line
    line_cap: int  # characters kept of one long line
    spans: int  # how many error spans, counted from the end


def _plans(n_spans: int, wide: int) -> list[_Plan]:
    """From the most generous to the tightest; each keeps about a subset of the one before.

    A roomy budget buys more tail and context; a tight one first loses context, then head
    and tail, then the error windows farthest from the end, then the tail down to nothing:
    the last error line is the one thing worth keeping alone.
    """
    plans = [
        _Plan(30, 300, 30, 15, 200, wide, n_spans),
        _Plan(20, 150, 20, 10, 120, wide, n_spans),
        _Plan(15, 80, 12, 6, 80, wide, n_spans),
        _Plan(HEAD_LINES, 50, 8, 4, 60, wide, n_spans),
    ]
    for before, after in ((8, 4), (5, 3), (3, 2), (2, 1), (1, 1), (1, 0), (0, 0)):
        plans.append(_Plan(HEAD_LINES, TAIL_LINES, before, after, 60, 2000, n_spans))
    for head, tail, cap, line_cap in (
        (5, 20, 30, 1000),
        (3, 10, 12, 500),
        (2, 5, 8, 500),
        (1, 3, 8, 500),
        (1, 2, 8, 500),
    ):
        plans.append(_Plan(head, tail, 0, 0, cap, line_cap, n_spans))
    for k in range(n_spans - 1, 0, -1):  # drop the windows farthest from the end first
        plans.append(_Plan(1, 2, 0, 0, 8, 500, k))
    last = min(n_spans, 1)
    for head, tail, cap, line_cap in (
        (1, 2, 6, 500),
        (1, 1, 4, 300),
        (1, 1, 3, 300),
        (1, 1, 2, 200),
        (0, 1, 1, 200),
    ):
        plans.append(_Plan(head, tail, 0, 0, cap, line_cap, last))
    if n_spans:
        plans.append(_Plan(0, 0, 0, 0, 0, 160, 1))
    return plans


def _plan_ranges(
    plan: _Plan, spans: Sequence[Span], n: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Kept ranges (merged) and, separately, the error-window ranges (merged).

    `spans` is in keeping order: the plan keeps the last `plan.spans` of them.
    """
    windows: list[tuple[int, int]] = []
    for span in spans[len(spans) - plan.spans :] if plan.spans else ():
        lo = max(0, span.start - plan.before)
        hi = min(n, span.end + 1 + plan.after)
        # What an assertion block says differs, as many lines as a tight plan can spare.
        explain = span.explain[: plan.span_cap // 2]
        if span.end - span.start + 1 <= plan.span_cap + 1:
            windows.append((lo, hi))
            # The diff under unittest's and jest's error line, beyond the context after it.
            windows.extend((e, e + 1) for e in explain if e >= hi)
            continue
        # A long block: its primary line, and while more fits its first line, its extra
        # lines and the end where its exception is (Python) or the start where the panic
        # message and top frames are (Go, Java).
        windows.append((span.primary, span.primary + 1))
        if not plan.span_cap:
            continue
        windows.append((lo, span.start + 1))
        windows.extend((e, e + 1) for e in span.extra)
        windows.extend((e, e + 1) for e in explain)
        if span.tail_heavy:
            windows.append((span.end + 1 - plan.span_cap, hi))
        else:
            windows.append((span.start, span.start + max(1, plan.span_cap - len(explain))))
            windows.append((span.end + 1, hi))
    windows = merge_ranges(windows)
    head = (0, min(plan.head, n))
    tail = (max(0, n - plan.tail), n)
    return merge_ranges([head, tail, *windows]), windows


def _tier(span: Span) -> int:
    return 0 if span.generic else 2 if span.block else 1


def excerpt_log(text: str, max_tokens: int, count: Counter) -> Excerpt:
    """Head, tail and error windows of a log, within `max_tokens` as counted by `count`."""
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    lines = _split(text)
    n = len(lines) if text else 0
    if fits_unchanged(text, max_tokens, count):
        return Excerpt(text, False, n, n, tuple(i + 1 for i in find_error_lines(lines)))
    # Keeping order: windows are dropped from the front of this list. Generic ones ("exit
    # code 1") go first, then plain error lines, then blocks (a traceback, a panic): a block
    # says what went wrong and where, and the lines after it are mostly its consequences.
    # Within each, the farthest from the end go first: the last error is usually the real one.
    spans = sorted(error_spans(lines), key=lambda s: (_tier(s), s.start))
    keys = sorted({k for s in spans for k in s.keys})
    ratio = chars_per_token(text, count)
    # A roomy budget may give one long line (a minified bundle, a JSON blob) up to half of it.
    plans = _plans(len(spans), wide=max(2000, int(max_tokens * ratio / 2)))
    budget = Budget(max_tokens, count, ratio)
    rendered: dict[int, tuple[str, list[tuple[int, int]], list[tuple[int, int]]]] = {}

    def render(i: int) -> str:
        if i not in rendered:
            kept, windows = _plan_ranges(plans[i], spans, n)
            rendered[i] = (_render(lines, kept, plans[i].line_cap), kept, windows)
        return rendered[i][0]

    # Index -1 stands for "the whole text", which is known not to fit.
    tightest = len(plans) - 1
    t_tightest = budget.measure(render(tightest))
    if t_tightest is not None and t_tightest <= max_tokens:
        best = tightest - largest(
            0,
            len(plans),
            lambda k: budget.measure(render(tightest - k)),
            max_tokens,
            t_lo=t_tightest,
        )
        chars_cut = 0
        out, kept, windows = rendered[best]
    else:
        # Not even one line with its markers fits: cut the line that matters most (the last
        # error, else the last line) by characters, without its timestamp or the markers.
        line = spans[-1].primary if spans else n - 1
        out, chars_cut = char_cut(line_body(lines[line]), max_tokens, count, head_share=0.75)
        kept = [(line, line + 1)]
        windows = [(line, line + 1)] if spans else []
        best = tightest
    plan = plans[best]
    kept_lines = sum(b - a for a, b in kept)
    if not out:
        kept_lines = 0
    in_kept = [k for k in keys if _within(kept, k)] if out else []
    return Excerpt(
        text=out,
        cut=True,
        total_lines=n,
        kept_lines=kept_lines,
        error_lines=tuple(k + 1 for k in in_kept),
        head_lines=min(plan.head, n) if out else 0,
        tail_lines=min(plan.tail, n) if out else 0,
        error_windows=sum(
            1 for a, b in windows if bisect.bisect_left(in_kept, b) > bisect.bisect_left(in_kept, a)
        ),
        chars_cut=chars_cut,
    )


# --- excerpt_text --------------------------------------------------------------------------


def excerpt_text(text: str, max_tokens: int, count: Counter) -> Excerpt:
    """Head and tail lines of non-log text with a cut marker between, within `max_tokens`.

    The head gets two thirds: a source file's imports and first definitions, a document's
    title and introduction, say more about it than its end.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    lines = _split(text)
    n = len(lines) if text else 0
    if fits_unchanged(text, max_tokens, count):
        return Excerpt(text, False, n, n)
    ratio = chars_per_token(text, count)
    budget = Budget(max_tokens, count, ratio)

    def split(k: int) -> tuple[int, int]:
        head = k - k // 3
        return head, k - head

    def render(k: int) -> str:
        head, tail = split(k)
        return _render(lines, merge_ranges([(0, head), (n - tail, n)]), None)

    k = 0
    t1 = budget.measure(render(1)) if n > 1 else None
    if t1 is not None and t1 <= max_tokens:
        # Estimate from line lengths how many lines make the target, then verify.
        offsets = [0, *accumulate(len(line) + 1 for line in lines)]

        def chars(k: int) -> int:
            head, tail = split(k)
            return offsets[head] + offsets[n] - offsets[n - tail]

        target = max_tokens * ratio * 0.95
        guess = bisect_max(1, n, lambda k: chars(k) <= target)
        k = largest(
            1,
            n,
            lambda k: budget.measure(render(k)),
            max_tokens,
            t_lo=t1,
            guess=guess,
            slack=0.02,
        )
    if k:
        head, tail = split(k)
        return Excerpt(render(k), True, n, k, head_lines=head, tail_lines=tail)
    out, chars_cut = char_cut(text, max_tokens, count, head_share=2 / 3)
    return Excerpt(out, True, n, 0, chars_cut=chars_cut)
