"""Which chunks the analysts read: coverage of distinct errors first, then score.

Ranking alone lets near-identical chunks fill the budget: a 40 MB log repeats the same benign
error thousands of times, each repeat scores alike, and a root cause that appears once loses
its place to the hundredth copy. So every error line gets a signature (its text with numbers,
hex, ids and timestamps masked: the same error from another request, pod or minute is one
signature), and selection first takes each chunk that holds a signature no chosen chunk holds
yet (rarest signatures first, then best score); then the rest round-robin over chunks'
signature sets (the second copy of each kind of chunk before the third of any), best score
first within a round. The bound on chunks is the caller's, as before. Pure: scores and signatures in, chunk ids out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from cardloop.prompts.log_errors import line_body

# Longer error lines are cut before masking: the masks' token pattern is linear on short
# lines, and what tells two errors apart sits at their start.
_MAX_LINE = 300
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<ts>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    # Digests and commit ids, even the rare ones with no digit in them.
    (re.compile(r"\b[0-9a-fA-F]{12,}\b"), "<hex>"),
    # Any token holding a digit: counts, ports, IPs, durations, versions, pod and job suffixes
    # ("payments-worker-7d9f8"), request ids, file names numbered by a generator.
    (re.compile(r"[\w.:/-]*\d[\w.:/-]*"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def error_signature(line: str) -> str:
    """The error line as a kind of error: prefix gone, variable parts masked."""
    text = line_body(line)[:_MAX_LINE]
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text.strip()


def select_diverse(scores: Mapping[int, float], signatures: Mapping[int, frozenset[str]], limit: int,
                   shapes: Mapping[int, frozenset[str]] | None = None) -> list[int]:
    """At most `limit` chunk ids: one per uncovered error signature first, then round-robin by
    signature set, best score first within a round.

    `scores`: chunk id -> fused query and error score (a chunk holding errors but no score
    counts as 0); `signatures`: chunk id -> its error lines' signatures (empty or absent for a
    chunk without error lines); `shapes`: for chunks without error lines, their line templates
    (chunk_shape), so that copies of one noise template take turns too.
    """
    if limit <= 0:
        return []
    candidates = set(scores) | {cid for cid, sigs in signatures.items() if sigs}
    ranked = sorted(candidates, key=lambda cid: (-scores.get(cid, 0.0), cid))
    held: dict[str, int] = {}  # signature -> how many chunks hold it
    for sigs in signatures.values():
        for sig in sigs:
            held[sig] = held.get(sig, 0) + 1
    chosen: list[int] = []
    covered: set[str] = set()
    # Rarest first when there are more signatures than room: an error seen once or twice (the
    # overlap repeats a line in two chunks) is likelier the cause than one repeated a thousand
    # times, which still gets its one chunk when there is room. Score orders within a rarity.
    for cid in sorted((c for c in ranked if signatures.get(c)), key=lambda c: _rarity(held, signatures[c])):
        sigs = signatures[cid]
        if not sigs <= covered:
            chosen.append(cid)
            covered |= sigs
            if len(chosen) == limit:
                return chosen
    taken = set(chosen)
    # Copies already taken per signature set: a set seen in pass one starts its round later.
    rounds: dict[tuple[str, frozenset[str]], int] = {}
    for cid in chosen:
        rounds[("errors", signatures[cid])] = rounds.get(("errors", signatures[cid]), 0) + 1
    shapes = shapes or {}

    def kind(cid: int) -> tuple[str, frozenset[str]] | None:
        if signatures.get(cid):
            return ("errors", signatures[cid])
        # Without error lines or a shape, a chunk is a kind of its own: nothing says two are alike.
        return ("shape", shapes[cid]) if shapes.get(cid) else None

    rest: list[tuple[int, int, int]] = []  # (round, rank by score, chunk id)
    for i, cid in enumerate(c for c in ranked if c not in taken and c in scores):
        k = kind(cid)
        rest.append((_next_round(rounds, k) if k else 0, i, cid))
    rest.sort()
    chosen += [cid for _, _, cid in rest[: limit - len(chosen)]]
    return chosen


def _rarity(held: Mapping[str, int], sigs: frozenset[str]) -> int:
    """How often the chunk's rarest error recurs, by powers of two (1-2 chunks, 3-4, 5-8, ...)."""
    return (min(held[s] for s in sigs) - 1).bit_length()


def _next_round(rounds: dict[tuple[str, frozenset[str]], int], key: tuple[str, frozenset[str]]) -> int:
    n = rounds.get(key, 0)
    rounds[key] = n + 1
    return n


def signatures_of(lines: Iterable[str]) -> frozenset[str]:
    return frozenset(error_signature(line) for line in lines)


def chunk_shape(text: str) -> frozenset[str]:
    """A chunk as the set of its lines' templates (masked as error lines are). A log's noise is
    a few templates filled with numbers and ids, so two chunks of the same noise have one shape
    and a chunk holding one line unlike the rest has its own."""
    return frozenset(error_signature(line) for line in text.split("\n") if line.strip())
