"""A source file as the prompt shows it: with line numbers, or, when it does not fit, an excerpt
around the lines that matter, with markers that say how many lines were cut."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from cardloop.integrations.sources.ranking import term_counts
from cardloop.integrations.sources.repository.files import split_lines
from cardloop.prompts.logs import Counter, excerpt_text

_DEF_LINE = re.compile(r"^\s*(?:async\s+def|def|class|func|function|fn|pub\s+fn|public|private|protected)\b")
_HEAD_LINES = 12
_OBVIOUSLY_OVER_CHARS = 8  # no text averages more characters per token than this


def _marker(n: int) -> str:
    return f"[... {n:,} line{'' if n == 1 else 's'} cut ...]"


def number_lines(lines: Sequence[str], start: int = 0, end: int | None = None, width: int = 4) -> list[str]:
    end = len(lines) if end is None else end
    return [f"{i + 1:>{width}} | {lines[i]}" for i in range(start, end)]


def _render(lines: Sequence[str], kept: list[tuple[int, int]], width: int) -> str:
    parts: list[str] = []
    pos = 0
    for a, b in kept:
        if a > pos:
            parts.append(_marker(a - pos))
        parts.extend(number_lines(lines, a, b, width))
        pos = b
    if pos < len(lines):
        parts.append(_marker(len(lines) - pos))
    return "\n".join(parts)


def _definition_line(lines: Sequence[str], name: str) -> int | None:
    pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class|func|function|fn)\s+(?:\([^)]*\)\s*)?{re.escape(name)}\b")
    for i, line in enumerate(lines):
        if pattern.search(line):
            return i
    return None


def render_file(
    text: str,
    max_tokens: int,
    count: Counter,
    *,
    lines_of_interest: Sequence[int] = (),
    names: Sequence[str] = (),
    query: Mapping[str, float] | None = None,
    idf: Callable[[str], float] | None = None,
) -> tuple[str, bool]:
    """The file with line numbers, or, when that does not fit `max_tokens`, an excerpt: the
    head (imports, module docstring), the lines around `lines_of_interest` (1-based, from
    the card) and around the definitions of `names`, then around the lines matching `query`
    best, each window as large as the budget allows. Returns (text, excerpted)."""
    lines = split_lines(text)
    n = len(lines)
    width = max(4, len(str(n)))
    if len(text) <= max_tokens * _OBVIOUSLY_OVER_CHARS:
        full = "\n".join(number_lines(lines, width=width))
        if count(full) <= max_tokens:
            return full, False

    # Windows in priority order: (first line, end line, focus line), 0-based, end exclusive.
    windows: list[tuple[int, int, int]] = []
    anchors = [ln - 1 for ln in lines_of_interest if 0 < ln <= n]
    anchors += [d for d in (_definition_line(lines, name) for name in names) if d is not None]
    for a in anchors:
        start = a - 10
        # Start at the enclosing definition when it is near: the function the line is in.
        for j in range(a, max(-1, a - 30), -1):
            if _DEF_LINE.match(lines[j]):
                start = j
                break
        windows.append((max(0, start), min(n, a + 9), a))
    if query:
        weight = idf or (lambda _t: 1.0)
        scored: list[tuple[float, int]] = []
        for i, line in enumerate(lines):
            terms = term_counts(line)
            s = sum(query.get(t, 0.0) * weight(t) for t in terms)
            if s > 0:
                scored.append((s * (1.5 if _DEF_LINE.match(line) else 1.0), i))
        scored.sort(key=lambda si: (-si[0], si[1]))
        windows += [(max(0, i - 4), min(n, i + 6), i) for _, i in scored[:40]]

    # Estimate tokens per line from a sample, select by estimate, then verify by counting.
    sample = "\n".join(number_lines(lines, 0, min(n, 200), width))
    ratio = max(1.0, len(sample) / max(1, count(sample)))
    cost = [(len(line) + width + 4) / ratio + 1 for line in lines]
    marker_cost = 10.0

    def select(target: float) -> list[tuple[int, int]]:
        keep = bytearray(n)
        used = marker_cost  # the marker after the last kept range

        def add(lo: int, hi: int, marker: bool = True) -> bool:
            nonlocal used
            extra = sum(cost[i] for i in range(lo, hi) if not keep[i]) + (marker_cost if marker else 0.0)
            if used + extra > target:
                return False
            keep[lo:hi] = b"\1" * (hi - lo)
            used += extra
            return True

        head = min(n, _HEAD_LINES)
        while head and not add(0, head):
            head //= 2
        placed: list[tuple[int, int]] = [(0, head)] if head else []
        for a, b, focus in windows:
            # A window that does not fit whole is tried narrower around its focus line.
            for lo, hi in ((a, b), (max(a, focus - 6), min(b, focus + 4)), (max(a, focus - 2), min(b, focus + 2)),
                           (focus, focus + 1)):
                if add(lo, hi):
                    placed.append((lo, hi))
                    break
        # Room left: widen what was placed, the most important first, a few lines at a time.
        grew = True
        while grew:
            grew = False
            for i, (lo, hi) in enumerate(placed):
                nlo, nhi = max(0, lo - 2), min(n, hi + 2)
                if (nlo, nhi) != (lo, hi) and add(nlo, nhi, marker=False):
                    placed[i] = (nlo, nhi)
                    grew = True
        ranges: list[tuple[int, int]] = []
        i = 0
        while i < n:
            if keep[i]:
                j = i
                while j < n and keep[j]:
                    j += 1
                ranges.append((i, j))
                i = j
            else:
                i += 1
        return ranges

    target = float(max_tokens)
    for _ in range(6):
        kept = select(target * 0.95)
        if kept:
            out = _render(lines, kept, width)
            if count(out) <= max_tokens:
                return out, True
        target *= 0.85
    # Not even a few lines fit: cut the numbered text by characters.
    return excerpt_text("\n".join(number_lines(lines, 0, min(n, 50), width)), max_tokens, count).text, True
