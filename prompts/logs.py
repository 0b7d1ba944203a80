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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

Counter = Callable[[str], int]

# No token of a byte-level BPE vocabulary covers more characters than this (cl100k_base's
# longest token is 128 bytes), so a text longer than max_tokens * this cannot fit: it is cut
# without being counted. A counter with longer tokens would only lose the "unchanged" shortcut
# for texts that would have fit; the budget still holds because results are always counted.
MAX_CHARS_PER_TOKEN = 128

# Head and tail of the standard plan; a roomy budget keeps more, a tight one less.
HEAD_LINES = 10
TAIL_LINES = 30

_SPAN_SCAN_LIMIT = 2000  # a traceback longer than this is a runaway, not a block to keep
_RUN_GAP = 2  # error lines at most this many lines apart are one block


def _lines_marker(n: int) -> str:
    return f"[... {n:,} line{'' if n == 1 else 's'} cut ...]"


def _chars_marker(n: int) -> str:
    return f"[... {n:,} chars cut ...]"


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


# --- finding error lines -------------------------------------------------------------------

# Timestamps and `[pod/name/container]` prefixes that GitHub Actions and `kubectl logs
# --prefix --timestamps` put before the text; structure (indentation) is judged after them.
# One separator after the timestamp, not all whitespace: the indentation after it is data.
_TS = r"(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t])?"
_PREFIX = re.compile(r"^(?:\[[^\]\n]{1,200}\][ \t]*)?" + _TS)


@dataclass(frozen=True, slots=True)
class _Rule:
    r"""A line is an error when it contains `gate` and, if there is one, matches `pattern`.

    The gate is a plain substring (looked for in the lowercased line when it is all
    lowercase, as written otherwise): a few substring searches over the whole text find the
    candidate lines, and the regexes run only on those. Patterns start with a literal and
    check word boundaries with a lookbehind after it (`ERROR(?<![\w=-]ERROR)`), not with a
    leading `\b`: Python's re then skips to the literal instead of trying every position,
    which is several times faster (a 5 MB log of nothing but error lines: ~0.5 s, not ~2 s).
    """

    gate: str
    cased: bool  # the gate has capitals: look for it in the line as written
    pattern: re.Pattern[str] | None
    on_lower: bool  # the pattern is written for the lowercased line (case-insensitive)
    strong: bool  # counts whatever else the line says; a weak match can be vetoed


def _rule(gate: str, pattern: str | None = None, *, strong: bool, on_lower: bool = False) -> _Rule:
    compiled = re.compile(pattern) if pattern else None
    return _Rule(gate, gate != gate.lower(), compiled, on_lower, strong)


def _word(literal: str) -> str:
    """`literal` starting at a word boundary, as a literal-first pattern."""
    escaped = re.escape(literal)
    return rf"{escaped}(?<!\w{escaped})"


_RULES: tuple[_Rule, ...] = (
    # GitHub Actions annotations: as rendered in the log, and as a workflow command.
    _rule("##[error]", strong=True),
    _rule("::error", r"::error(?<!\S::error)(?:[ \t]|::)", strong=True),
    _rule("error ts", r"error TS\d+:", strong=True),  # tsc
    _rule("error[e", r"error\[E\d{4}\]", strong=True),  # rustc
    _rule("fatal error:", strong=True),  # Go runtime, C compilers
    _rule("found", r"Found [1-9]\d* errors?\b", strong=True),  # tsc / mypy summary
    _rule(": ***", r"make(?:\[\d+\])?: \*\*\* ", strong=True),  # "make: *** [test] Error 1"
    _rule("npm err!", strong=True),
    _rule("npm error ", strong=True),
    _rule("panic:", _word("panic:"), strong=True),  # Go
    _rule("OOMKilled", strong=True),
    _rule("segmentation fault", strong=True),
    _rule("SIGSEGV", strong=True),
    _rule("core dumped", strong=True),
    # "exit code 1", "exited with code 137", "exit status 2", "Exit Code: 137"; not code 0.
    _rule("exit", _word("exit") + r"(?:ed)?(?: with)?[ \t]+(?:status|code):?[ \t]*[1-9]\d*\b",
          strong=True, on_lower=True),
    _rule("Caused by:", strong=True),  # Java
    _rule("Exception in thread", strong=True),
    _rule("AssertionError", strong=True),
    _rule("CrashLoopBackOff", strong=True),
    _rule("Back-off restarting failed container", strong=True),
    # "Error: x", "TypeError: x", "psycopg.OperationalError: x", "error: could not compile";
    # not "continue-on-error: true", "on_error:" or "error_handler.py".
    _rule("Error:", r"Error:(?=\s|$)", strong=False),
    _rule("error:", r"error:(?<![\w-]error:)(?=\s|$)", strong=False),
    _rule("Exception:", r"Exception:(?=\s|$)", strong=False),
    _rule("Error", r":\d+: [A-Z]\w*Error\b", strong=False),  # pytest's "tests/x.py:42: KeyError"
    _rule("ERROR", r"ERROR(?<![\w=-]ERROR)(?![\w=-])", strong=False),
    _rule("FATAL", r"FATAL(?<![\w=-]FATAL)(?![\w=-])", strong=False),
    _rule("fatal:", _word("fatal:"), strong=False),  # git
    _rule("CRITICAL", r"CRITICAL(?<![\w=-]CRITICAL)(?![\w=-])", strong=False),
    _rule("FAIL", r"FAIL(?<![\w-]FAIL)(?:ED)?(?![\w-])", strong=False),
    _rule("Killed", _word("Killed") + r"\b", strong=False),
    # Structured logs: level=error, "level": "fatal" (not loglevel=error, a setting). Gated
    # on the level's name, since every line of a JSON log has "level" in it.
    *(
        _rule(name, _word("level") + rf"[\"']?[ \t]*[:=][ \t]*[\"']?{name}\b",
              strong=False, on_lower=True)
        for name in ("error", "fatal", "critical")
    ),
    _rule("E  ", r"^" + _TS + r"E[ \t]{2,}\S", strong=False),  # pytest's "E   assert 1 == 2"
    _rule("\u25cf ", r"^" + _TS + r"[ \t]*\u25cf ", strong=False),  # jest's failing test
)
# As plain tuples: this loop runs for every candidate line, attribute access shows.
_STRONG_RULES = tuple((r.gate, r.cased, r.pattern, r.on_lower) for r in _RULES if r.strong)
_WEAK_RULES = tuple((r.gate, r.cased, r.pattern, r.on_lower) for r in _RULES if not r.strong)

# A weak match does not count on a line that says there were none ("Found 0 errors",
# "no failures", "errors: 0") or that sets a log level. Written for the lowercased line.
_VETO = re.compile(
    r"(?:0(?<![\w.]0)|no(?<!\wno)|zero(?<!\wzero)|without(?<!\wwithout))"
    r"[ \t]+(?:error|failure|failed|problem)s?\b"
    r"|(?:error|failure|failed)s?[ \t]*[:=][ \t]*0\b"
    r"|log[_-]?level"
)


def _minimal_gates(gates: set[str]) -> tuple[str, ...]:
    # For finding candidate lines, all lowercased, and "error" makes "error:" redundant:
    # every search over the whole text costs a few milliseconds on a 5 MB log.
    lowered = {g.lower() for g in gates}
    return tuple(sorted(g for g in lowered if not any(o != g and o in g for o in lowered)))


_CANDIDATE_GATES = _minimal_gates({r.gate for r in _RULES} | {"traceback"})


_RuleTuple = tuple[str, bool, re.Pattern[str] | None, bool]


def _hits(rules: tuple[_RuleTuple, ...], line: str, low: str) -> bool:
    for gate, cased, pattern, on_lower in rules:
        if gate in (line if cased else low) and (
            pattern is None or pattern.search(low if on_lower else line)
        ):
            return True
    return False


# Error lines that only say that something failed, not what: a process's exit code, npm's
# and make's lifecycle lines, a tool's error count. The lines that say what come first; these
# windows are the first to go when the budget is tight, whatever their position.
_GENERIC = re.compile(
    r"(?i:exit(?:ed)?(?: with)?[ \t]+(?:status|code))"
    r"|npm ERR!|npm error |make(?:\[\d+\])?: \*\*\*|Found \d+ errors?\b"
    r"|Back-off restarting failed container|CrashLoopBackOff"
)

_TRACEBACK = re.compile(r"Traceback \(most recent call last\):|Exception Group Traceback")
_GOROUTINE = re.compile(r"goroutine \d+ \[")
_CHAINED = re.compile(
    r"The above exception was the direct cause|During handling of the above exception"
)
_STACK_FRAME = re.compile(r"[ \t]+at [\w$<.]|[ \t]*\.\.\. \d+ more\b|Caused by:")


@dataclass(frozen=True, slots=True)
class _Span:
    """Lines that belong together: an error line, a run of them, or a traceback/panic block."""

    start: int
    end: int  # inclusive
    keys: tuple[int, ...]  # the lines in it that state an error
    primary: int  # the one line kept when nothing else of the span fits
    tail_heavy: bool  # Python puts the exception last; Go, Java and pytest's E lines first
    # Lines kept with the primary whenever any more of a long span fits: the frame where a
    # Go panic happened, the root exception of a chained Python traceback.
    extra: tuple[int, ...] = ()
    generic: bool = False  # only says that something failed (see _GENERIC)
    block: bool = False  # a traceback, panic or stack trace, not plain error lines


def _body(line: str) -> str:
    m = _PREFIX.match(line)
    return line[m.end() :] if m else line


def _is_frame(line: str) -> bool:
    # The substring test first: this runs on the line after every error line.
    return ("at " in line or "more" in line or "Caused by" in line) and bool(
        _STACK_FRAME.match(_body(line))
    )


def _python_traceback(lines: Sequence[str], start: int, limit: int) -> int | None:
    """The index of the exception line ending the traceback at `start`, if there is one."""
    # Frames and code lines are indented; the first unindented line after at least one
    # frame is the exception.
    for j in range(start + 1, limit):
        body = _body(lines[j]).rstrip("\r")
        if not body.strip():
            return None
        if not body[0].isspace():
            return j if j > start + 1 else None
    return None


def _python_block(lines: Sequence[str], start: int) -> _Span:
    limit = min(len(lines), start + _SPAN_SCAN_LIMIT)
    exceptions: list[int] = []
    head = start
    while (exc := _python_traceback(lines, head, limit)) is not None:
        exceptions.append(exc)
        # "The above exception was the direct cause of the following exception:", a blank
        # line, and the next traceback: one chain, one block.
        nxt = next(
            (j for j in range(exc + 1, min(limit, exc + 6)) if _TRACEBACK.search(lines[j])), None
        )
        chained = any(_CHAINED.search(lines[j]) for j in range(exc + 1, nxt or exc + 1))
        if nxt is None or not chained:
            break
        head = nxt
    if not exceptions:
        # Cut off before its exception line (the log ends, or something else interleaved).
        end = start
        while end + 1 < limit and _body(lines[end + 1]).startswith((" ", "\t")):
            end += 1
        return _Span(start, end, (), start, tail_heavy=True, block=True)
    # The first exception of a chain is the root cause; the last one is what surfaced.
    root = exceptions[0]
    return _Span(
        start, exceptions[-1], tuple(exceptions), root, tail_heavy=True, extra=(root,), block=True
    )


def _go_block(lines: Sequence[str], start: int) -> _Span:
    # panic: ..., maybe "[signal ...]", a blank line, "goroutine 1 [running]:", frames, blank.
    limit = min(len(lines), start + _SPAN_SCAN_LIMIT)
    j = start + 1
    while j < limit and j <= start + 4 and not _GOROUTINE.match(_body(lines[j])):
        j += 1
    if j >= limit or not _GOROUTINE.match(_body(lines[j])):
        return _Span(start, start, (start,), start, tail_heavy=False)
    while j + 1 < limit and _body(lines[j + 1]).strip():
        j += 1
    # The frame after the last "panic(...)" call is where it happened: function and file:line.
    culprit = [
        k + 1 for k in range(start + 1, j) if _body(lines[k]).startswith("panic(")
    ]
    extra = (culprit[-1] + 1, culprit[-1] + 2) if culprit and culprit[-1] + 2 <= j else ()
    return _Span(start, j, (start,), start, tail_heavy=False, extra=extra, block=True)


def _stack_block(lines: Sequence[str], start: int, keys: set[int]) -> _Span:
    # Java / JavaScript: the exception line, then "\tat ..." frames, "Caused by:", "... 3 more".
    limit = min(len(lines), start + _SPAN_SCAN_LIMIT)
    j = start
    while j + 1 < limit and _is_frame(lines[j + 1]):
        j += 1
    inner = tuple(k for k in range(start, j + 1) if k in keys) or (start,)
    # The last "Caused by:" is the root cause; the first line says what surfaced.
    return _Span(start, j, inner, start, tail_heavy=False, extra=inner[-1:], block=True)


def _line_index(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos) - 1


def _matched_lines(lines: Sequence[str]) -> tuple[set[int], list[int]]:
    """Indexes of lines matching an error rule, and of traceback headers."""
    text = "\n".join(lines)
    lower = text.lower()
    starts = [0, *accumulate(len(line) + 1 for line in lines)]
    candidates: set[int] = set()
    for gate in _CANDIDATE_GATES:
        pos = lower.find(gate)
        while pos != -1:
            i = _line_index(starts, pos)
            candidates.add(i)
            # Next line: one hit is enough to make a line a candidate.
            pos = lower.find(gate, starts[i + 1])
    keys: set[int] = set()
    headers: list[int] = []
    for i in sorted(candidates):
        line = lines[i]
        low = line.lower()
        if "traceback" in low and _TRACEBACK.search(line):
            headers.append(i)
        if _hits(_STRONG_RULES, line, low) or (
            _hits(_WEAK_RULES, line, low) and not _VETO.search(low)
        ):
            keys.add(i)
    return keys, headers


def _error_spans(lines: Sequence[str]) -> list[_Span]:
    """Error lines grouped into blocks, in order of position."""
    keys, headers = _matched_lines(lines)
    spans: list[_Span] = []
    covered: set[int] = set()
    for h in headers:
        if h in covered:
            continue
        span = _python_block(lines, h)
        spans.append(span)
        covered.update(range(span.start, span.end + 1))
    # Plain error lines close together form one block: pytest's E lines and the location
    # under them, the FAILED summary with the "##[error]Process completed" after it.
    run: list[int] = []

    def close_run() -> None:
        if run:
            generic = all(_GENERIC.search(lines[k]) for k in run)
            spans.append(
                _Span(run[0], run[-1], tuple(run), run[0], tail_heavy=False, generic=generic)
            )
            run.clear()

    for k in sorted(keys):
        if k in covered:
            continue
        body = _body(lines[k])
        if body.startswith("panic:"):
            span = _go_block(lines, k)
        elif k + 1 < len(lines) and _is_frame(lines[k + 1]):
            span = _stack_block(lines, k, keys)
        else:
            if run and k - run[-1] > _RUN_GAP + 1:
                close_run()
            run.append(k)
            continue
        close_run()
        spans.append(span)
        covered.update(range(span.start, span.end + 1))
    close_run()
    spans.sort(key=lambda s: s.start)
    return spans


def find_error_lines(lines: Sequence[str]) -> list[int]:
    """0-based indexes of the lines that state an error, in order.

    A Python traceback contributes its exception line (the block's frames are context,
    kept by `excerpt_log` around it, not error lines), a Go panic its `panic:` line.
    """
    return sorted({k for span in _error_spans(lines) for k in span.keys})


# --- searching for the largest candidate that fits -----------------------------------------


class _Budget:
    """Counts candidates against the target, skipping those far too long to be worth it."""

    def __init__(self, max_tokens: int, count: Counter, chars_per_token: float) -> None:
        self.max_tokens = max_tokens
        self.count = count
        # Twice the sampled ratio: a candidate longer than that will not fit in practice, and
        # counting it (a large string) is what would make excerpting slow.
        self.char_limit = min(
            max_tokens * MAX_CHARS_PER_TOKEN, int(max_tokens * chars_per_token * 2) + 256
        )

    def measure(self, text: str) -> int | None:
        """The token count, or None for a candidate too long to be worth counting."""
        return None if len(text) > self.char_limit else self.count(text)

    def fits(self, text: str) -> bool:
        n = self.measure(text)
        return n is not None and n <= self.max_tokens


def _bisect(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest k in [lo, hi) with ok(k), given ok(lo) and not ok(hi); ok grows monotone."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _largest(
    lo: int,
    hi: int,
    measure: Callable[[int], int | None],
    limit: int,
    *,
    t_lo: int,
    guess: int | None = None,
    slack: float = 0.0,
) -> int:
    """About the largest k in [lo, hi) with measure(k) <= limit.

    Given measure(lo) == t_lo <= limit, and k = hi over the limit; sizes grow with k.
    Probes `guess` first, then interpolates on the measured counts, bisecting on every
    other step so a bad estimate still converges in log time. Stops once the bracket is
    within `slack` (a fraction of lo): a few lines short of the exact optimum is fine,
    another count call is not.
    """
    t_hi: int | None = None
    step = 0
    while hi - lo > max(1, int(lo * slack)):
        if step == 0 and guess is not None:
            mid = guess
        elif step % 2 == 1 and t_hi is not None and t_hi > t_lo:
            mid = lo + int((hi - lo) * (limit - t_lo) / (t_hi - t_lo))
        elif step % 2 == 1 and t_hi is None and lo > 0 and t_lo > 0:
            mid = int(lo * limit / t_lo)
        else:
            mid = (lo + hi) // 2
        mid = min(max(mid, lo + 1), hi - 1)
        step += 1
        t = measure(mid)
        if t is not None and t <= limit:
            lo, t_lo = mid, t
        else:
            hi, t_hi = mid, t
    return lo


def _ratio(text: str, count: Counter) -> float:
    # Characters per token of a sample from the end, where the interesting part of a log is.
    sample = text[-16_000:]
    n = count(sample)
    return len(sample) / n if n else float(MAX_CHARS_PER_TOKEN)


def _fits_unchanged(text: str, max_tokens: int, count: Counter) -> bool:
    if len(text) > max_tokens * MAX_CHARS_PER_TOKEN:
        return False
    # A prefix that is already over budget settles it without counting megabytes. A prefix
    # can count a little more than the whole (its last word split differently), never more
    # than one token's worth of bytes, hence the margin.
    probe = max_tokens * 16 + 1024
    if len(text) > 2 * probe and count(text[:probe]) > max_tokens + MAX_CHARS_PER_TOKEN:
        return False
    return count(text) <= max_tokens


def _cut_line(line: str, cap: int) -> str:
    if len(line) <= cap:
        return line
    marker = f" {_chars_marker(len(line) - cap)} "
    head = cap * 2 // 3
    return line[:head] + marker + line[len(line) - (cap - head) :]


def _char_cut(text: str, max_tokens: int, count: Counter, head_share: float) -> tuple[str, int]:
    """The last resort: text[:h] + marker + text[-t:], as long as the budget allows."""
    ratio = _ratio(text, count)
    budget = _Budget(max_tokens, count, ratio)

    def render(k: int) -> str:
        h = int(k * head_share)
        t = k - h
        parts = [text[:h]] if h else []
        parts.append(_chars_marker(len(text) - k))
        if t:
            parts.append(text[len(text) - t :])
        return "\n".join(parts)

    if budget.fits(text):  # a log line stripped of its timestamp may fit whole
        return text, 0
    t0 = budget.measure(render(0))
    if t0 is None or t0 > max_tokens:
        return "", len(text)
    guess = int(max_tokens * ratio * 0.9)
    k = _largest(
        0,
        len(text),
        lambda k: budget.measure(render(k)),
        max_tokens,
        t_lo=t0,
        guess=guess,
        slack=0.01,
    )
    return render(k), len(text) - k


# --- rendering kept line ranges ------------------------------------------------------------


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
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
            parts.append(line if line_cap is None else _cut_line(line, line_cap))
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
    plan: _Plan, spans: Sequence[_Span], n: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Kept ranges (merged) and, separately, the error-window ranges (merged).

    `spans` is in keeping order: the plan keeps the last `plan.spans` of them.
    """
    windows: list[tuple[int, int]] = []
    for span in spans[len(spans) - plan.spans :] if plan.spans else ():
        lo = max(0, span.start - plan.before)
        hi = min(n, span.end + 1 + plan.after)
        if span.end - span.start + 1 <= plan.span_cap + 1:
            windows.append((lo, hi))
            continue
        # A long block: its primary line, and while more fits its first line, its extra
        # lines and the end where its exception is (Python) or the start where the panic
        # message and top frames are (Go, Java).
        windows.append((span.primary, span.primary + 1))
        if not plan.span_cap:
            continue
        windows.append((lo, span.start + 1))
        windows.extend((e, e + 1) for e in span.extra)
        if span.tail_heavy:
            windows.append((span.end + 1 - plan.span_cap, hi))
        else:
            windows.append((span.start, span.start + plan.span_cap))
            windows.append((span.end + 1, hi))
    windows = _merge(windows)
    head = (0, min(plan.head, n))
    tail = (max(0, n - plan.tail), n)
    return _merge([head, tail, *windows]), windows


def _tier(span: _Span) -> int:
    return 0 if span.generic else 2 if span.block else 1


def excerpt_log(text: str, max_tokens: int, count: Counter) -> Excerpt:
    """Head, tail and error windows of a log, within `max_tokens` as counted by `count`."""
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    lines = _split(text)
    n = len(lines) if text else 0
    if _fits_unchanged(text, max_tokens, count):
        return Excerpt(text, False, n, n, tuple(i + 1 for i in find_error_lines(lines)))
    # Keeping order: windows are dropped from the front of this list. Generic ones ("exit
    # code 1") go first, then plain error lines, then blocks (a traceback, a panic): a block
    # says what went wrong and where, and the lines after it are mostly its consequences.
    # Within each, the farthest from the end go first: the last error is usually the real one.
    spans = sorted(_error_spans(lines), key=lambda s: (_tier(s), s.start))
    keys = sorted({k for s in spans for k in s.keys})
    ratio = _ratio(text, count)
    # A roomy budget may give one long line (a minified bundle, a JSON blob) up to half of it.
    plans = _plans(len(spans), wide=max(2000, int(max_tokens * ratio / 2)))
    budget = _Budget(max_tokens, count, ratio)
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
        best = tightest - _largest(
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
        out, chars_cut = _char_cut(_body(lines[line]), max_tokens, count, head_share=0.75)
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
    if _fits_unchanged(text, max_tokens, count):
        return Excerpt(text, False, n, n)
    ratio = _ratio(text, count)
    budget = _Budget(max_tokens, count, ratio)

    def split(k: int) -> tuple[int, int]:
        head = k - k // 3
        return head, k - head

    def render(k: int) -> str:
        head, tail = split(k)
        return _render(lines, _merge([(0, head), (n - tail, n)]), None)

    k = 0
    t1 = budget.measure(render(1)) if n > 1 else None
    if t1 is not None and t1 <= max_tokens:
        # Estimate from line lengths how many lines make the target, then verify.
        offsets = [0, *accumulate(len(line) + 1 for line in lines)]

        def chars(k: int) -> int:
            head, tail = split(k)
            return offsets[head] + offsets[n] - offsets[n - tail]

        target = max_tokens * ratio * 0.95
        guess = _bisect(1, n, lambda k: chars(k) <= target)
        k = _largest(
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
    out, chars_cut = _char_cut(text, max_tokens, count, head_share=2 / 3)
    return Excerpt(out, True, n, 0, chars_cut=chars_cut)
