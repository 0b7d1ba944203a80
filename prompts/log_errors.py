"""Finding the lines of a log that say what went wrong: error lines by a rule table (strong
ones such as tracebacks, panics and `##[error]`, weak ones such as "exit code 1"), and the
whole block each belongs to (a Python traceback, a Go panic, a Java stack). Pure: text in,
line numbers out; prompts/logs.py keeps the windows around them when it excerpts a log."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

_SPAN_SCAN_LIMIT = 2000  # a traceback longer than this is a runaway, not a block to keep
_RUN_GAP = 2  # error lines at most this many lines apart are one block

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
class Span:
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
    # Lines that say what differs in an assertion block, most telling first (the test's
    # location, pytest's "Differing items:", the first changed lines of the diff): kept in
    # place of the last lines of the block's head, so a block costs what it did without them.
    explain: tuple[int, ...] = ()
    block: bool = False  # a traceback, panic or stack trace, not plain error lines


def line_body(line: str) -> str:
    """The line without its timestamp or `[pod/container]` prefix."""
    m = _PREFIX.match(line)
    return line[m.end() :] if m else line


def _is_frame(line: str) -> bool:
    # The substring test first: this runs on the line after every error line.
    return ("at " in line or "more" in line or "Caused by" in line) and bool(
        _STACK_FRAME.match(line_body(line))
    )


def _python_traceback(lines: Sequence[str], start: int, limit: int) -> int | None:
    """The index of the exception line ending the traceback at `start`, if there is one."""
    # Frames and code lines are indented; the first unindented line after at least one
    # frame is the exception.
    for j in range(start + 1, limit):
        body = line_body(lines[j]).rstrip("\r")
        if not body.strip():
            return None
        if not body[0].isspace():
            return j if j > start + 1 else None
    return None


def _python_block(lines: Sequence[str], start: int) -> Span:
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
        while end + 1 < limit and line_body(lines[end + 1]).startswith((" ", "\t")):
            end += 1
        return Span(start, end, (), start, tail_heavy=True, block=True)
    # The first exception of a chain is the root cause; the last one is what surfaced.
    root = exceptions[0]
    return Span(
        start, exceptions[-1], tuple(exceptions), root, tail_heavy=True, extra=(root,), block=True
    )


def _go_block(lines: Sequence[str], start: int) -> Span:
    # panic: ..., maybe "[signal ...]", a blank line, "goroutine 1 [running]:", frames, blank.
    limit = min(len(lines), start + _SPAN_SCAN_LIMIT)
    j = start + 1
    while j < limit and j <= start + 4 and not _GOROUTINE.match(line_body(lines[j])):
        j += 1
    if j >= limit or not _GOROUTINE.match(line_body(lines[j])):
        return Span(start, start, (start,), start, tail_heavy=False)
    while j + 1 < limit and line_body(lines[j + 1]).strip():
        j += 1
    # The frame after the last "panic(...)" call is where it happened: function and file:line.
    culprit = [
        k + 1 for k in range(start + 1, j) if line_body(lines[k]).startswith("panic(")
    ]
    extra = (culprit[-1] + 1, culprit[-1] + 2) if culprit and culprit[-1] + 2 <= j else ()
    return Span(start, j, (start,), start, tail_heavy=False, extra=extra, block=True)


def _stack_block(lines: Sequence[str], start: int, keys: set[int]) -> Span:
    # Java / JavaScript: the exception line, then "\tat ..." frames, "Caused by:", "... 3 more".
    limit = min(len(lines), start + _SPAN_SCAN_LIMIT)
    j = start
    while j + 1 < limit and _is_frame(lines[j + 1]):
        j += 1
    inner = tuple(k for k in range(start, j + 1) if k in keys) or (start,)
    # The last "Caused by:" is the root cause; the first line says what surfaced.
    return Span(start, j, inner, start, tail_heavy=False, extra=inner[-1:], block=True)


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


# pytest's assertion explanation: the lines that say what differs, before the long full diff
# (`-vv` prints every item of both sides), and the line under each that names the item.
_PYTEST_EXPLAIN = re.compile(
    r"E[ \t]+(?:Differing items:|Left contains|Right contains|At index \d+ diff:"
    r"|Extra items in the (?:left|right)|Omitting \d+ identical items)"
)
# The test's location: under the E lines (--tb=long/auto) or just above them (--tb=short).
_PYTEST_WHERE = re.compile(r"[^\s:][^:]*\.py:\d+: (?:in |[A-Z]\w*(?:Error|Exception)\b)")
# A changed line of the diff under it: "E     -  'key_010': ..." (ndiff, unittest's too).
_DIFF_LINE = re.compile(r"E[ \t]+[-+][ \t]+\S")
_EXPLAIN_KEEP = 8  # explanation lines kept of one block; more are the diff's own
_DIFF_KEEP = 6  # the first changed lines of its diff: where the two sides part


def _assertion_lines(lines: Sequence[str], run: Sequence[int]) -> tuple[int, ...]:
    """The lines of a long run of pytest E lines worth keeping besides its head: what the
    assertion explanation says differs, with the line under each, and the test's location.

    One look at each line of the run, with a substring test first: linear in the run."""
    out: list[int] = []
    diff: list[int] = []
    for k in range(run[0], run[-1] + 1):
        line = lines[k]
        if "E " not in line[:40] or (len(out) >= _EXPLAIN_KEEP and len(diff) >= _DIFF_KEEP):
            continue
        body = line_body(line)
        if not body.startswith("E"):
            continue
        if len(out) < _EXPLAIN_KEEP and _PYTEST_EXPLAIN.match(body):
            out.extend((k, k + 1) if k < run[-1] else (k,))
        elif len(diff) < _DIFF_KEEP and _DIFF_LINE.match(body):
            diff.append(k)
    # The location: among the run's last lines (the summary's "FAILED ..." may follow it
    # closely enough to join the run), or one of the three lines above its start.
    where = [
        k
        for k in (*run[-1:-5:-1], *range(run[0] - 1, max(-1, run[0] - 4), -1))
        if ".py:" in lines[k] and _PYTEST_WHERE.match(line_body(lines[k]))
    ][:1]
    return tuple(dict.fromkeys([*where, *out, *diff]))


# unittest's AssertionError and jest's "●" block put the diff under the error line, not on
# error lines: what says what differs there, found by a look at the lines up to the next span.
_JEST_TITLE = re.compile(r"[ \t]*\u25cf ")
_FOLLOW_EXPLAIN = re.compile(
    r"[ \t]*(?:First differing element|(?:First|Second) (?:list|tuple|sequence) contains"
    r"|Expected:|Received:|expect\(|[-+] (?:Expected|Received)\b)"
)
_FOLLOW_DIFF = re.compile(r"[ \t]*[-+] {1,8}\S")
_JS_TEST_FRAME = re.compile(r"[ \t]+at (?:.*? \()?[^\s()]+:\d+:\d+\)?[ \t]*\Z")
_FOLLOW_KEEP = 8


def _follow_lines(lines: Sequence[str], start: int, stop: int) -> tuple[int, ...]:
    """Lines in [start, stop) that say what differs: unittest's and jest's explanation lines,
    the first changed lines of the diff, and jest's first stack frame outside node_modules."""
    frame: list[int] = []
    diff: list[int] = []
    explain: list[int] = []
    for k in range(start, stop):
        body = line_body(lines[k])
        if body.startswith(("=====", "-----", "Traceback")):
            break  # unittest's next test, or the next traceback
        if _FOLLOW_EXPLAIN.match(body):
            if len(explain) < _FOLLOW_KEEP:
                explain.append(k)
        elif _FOLLOW_DIFF.match(body):
            if len(diff) < _FOLLOW_KEEP:
                diff.append(k)
        elif not frame and "at " in body and "node_modules" not in body and _JS_TEST_FRAME.match(body):
            frame.append(k)
        if frame and len(diff) >= _FOLLOW_KEEP and len(explain) >= _FOLLOW_KEEP:
            break
    # Most telling first: where (jest's frame), what changed, then the diff's headers.
    return (*frame, *diff[:_FOLLOW_KEEP], *explain)[:_FOLLOW_KEEP]


def _with_diffs(lines: Sequence[str], spans: list[Span]) -> list[Span]:
    # Each scan stops at the next span: the regions are disjoint, one look at each line.
    out: list[Span] = []
    for i, span in enumerate(spans):
        end = lines[span.end]
        body = line_body(end)
        follows = (span.block and span.tail_heavy and body.startswith("AssertionError")) or (
            not span.block and "\u25cf" in end and bool(_JEST_TITLE.match(body))
        )
        if follows:
            stop = spans[i + 1].start if i + 1 < len(spans) else len(lines)
            stop = min(stop, span.end + 1 + _SPAN_SCAN_LIMIT)
            found = _follow_lines(lines, span.end + 1, stop)
            if found:
                span = replace(span, explain=span.explain + found)
        out.append(span)
    return out


def error_spans(lines: Sequence[str]) -> list[Span]:
    """Error lines grouped into blocks, in order of position."""
    keys, headers = _matched_lines(lines)
    spans: list[Span] = []
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
            explain = _assertion_lines(lines, run) if len(run) > 8 else ()
            spans.append(
                Span(run[0], run[-1], tuple(run), run[0], tail_heavy=False, generic=generic,
                     explain=explain)
            )
            run.clear()

    for k in sorted(keys):
        if k in covered:
            continue
        body = line_body(lines[k])
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
    return _with_diffs(lines, spans)


def may_have_errors(text: str) -> bool:
    """False only when no line of `text` can be an error line (no rule's gate occurs in it):
    a quick look that lets a caller skip splitting and scanning the text."""
    lower = text.lower()
    return any(gate in lower for gate in _CANDIDATE_GATES)


def find_error_lines(lines: Sequence[str]) -> list[int]:
    """0-based indexes of the lines that state an error, in order.

    A Python traceback contributes its exception line (the block's frames are context,
    kept by `excerpt_log` around it, not error lines), a Go panic its `panic:` line.
    """
    return sorted({k for span in error_spans(lines) for k in span.keys})
