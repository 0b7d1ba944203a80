"""The lexical and regex index over a card's research chunks.

BM25 (the repository ranking's index, one document per chunk, no passages or paths) answers
the planner's queries; a regex scan answers grep. Chunk selection fuses the queries' rankings
(reciprocal rank fusion: a chunk high in several lists beats one top in a single list) with
an error-line prior (prompts/log_errors.py), because a failing log's root cause sits on lines
that look like errors whatever words the question used; and selection covers every distinct
error (masked signature) before repeats of one (selection.py). Built once per card and buffer set
and kept in a small LRU: the synthesizer's tools search the same index many times.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from cardloop.integrations.research.selection import chunk_shape, select_diverse, signatures_of
from cardloop.integrations.sources.ranking import BM25Index, BM25Params, IndexCache
from cardloop.prompts.log_errors import find_error_lines
from cardloop.prompts.research.chunks import Buffer, Chunk

RRF_K = 60
# A chunk's error lines add this much per line (capped): enough to lift a chunk with a
# traceback over one that merely repeats a query word, not enough to outrank three queries.
ERROR_WEIGHT = 0.004
ERROR_CAP = 5
MAX_GREP_HITS = 200
# A Chunk (a slotted dataclass of seven ints) as sys.getsizeof counts it, without its ints.
_CHUNK_BYTES = sys.getsizeof(Chunk(0, 0, 0, 0, 0, 0, 0))


class ResearchInputError(ValueError):
    """A tool argument the index cannot use (a bad regex, an unknown buffer)."""


@dataclass(frozen=True, slots=True)
class Hit:
    chunk_id: int
    score: float


class ChunkIndex:
    def __init__(self, buffers: Sequence[Buffer], chunks: Sequence[Chunk], texts: dict[int, str]) -> None:
        self.buffers = {b.buffer_id: b for b in buffers}
        self.chunks = {c.chunk_id: c for c in chunks}
        self._texts = texts  # buffer id -> the buffer's whole (redacted) text
        self._bm25 = BM25Index(((str(c.chunk_id), self.text(c.chunk_id)) for c in chunks),
                               BM25Params.content_only())
        self._errors: dict[int, int] | None = None
        self._signatures: dict[int, frozenset[str]] = {}
        # What the index cache charges for this index: the buffers' text (held whole), the chunk
        # spans and the BM25 postings. Computed once; the index does not grow afterwards but for
        # the error-line counts (a small int per chunk).
        self.nbytes = (sum(sys.getsizeof(t) for t in texts.values()) + self._bm25.nbytes()
                       + sys.getsizeof(self.chunks) + len(self.chunks) * (_CHUNK_BYTES + 2 * 28))

    def text(self, chunk_id: int) -> str:
        c = self.chunks[chunk_id]
        return self._texts[c.buffer_id][c.start:c.end]

    def where(self, chunk_id: int) -> str:
        c = self.chunks.get(chunk_id)
        if c is None:
            return f"chunk {chunk_id}"
        return f"{self.buffers[c.buffer_id].name} lines {c.first_line}-{c.last_line}"

    def error_lines(self) -> dict[int, int]:
        """Chunk id -> how many error lines it holds (computed once)."""
        if self._errors is None:
            # The signatures come from the same detector pass: kept only for chunks with errors,
            # and one string per distinct signature (interned), so thousands of repeats of one
            # error cost a pointer each.
            errors: dict[int, int] = {}
            for cid in self.chunks:
                lines = self.text(cid).split("\n")
                found = find_error_lines(lines)
                errors[cid] = len(found)
                if found:
                    self._signatures[cid] = frozenset(sys.intern(s) for s in signatures_of(lines[k] for k in found))
            self._errors = errors
        return self._errors

    def error_signatures(self) -> dict[int, frozenset[str]]:
        """Chunk id -> the masked signatures of its error lines (chunks without any left out)."""
        self.error_lines()
        return self._signatures

    def search(self, query: str, top_k: int = 10) -> list[Hit]:
        return [Hit(int(path), score) for path, score in self._bm25.rank(query, top_k)]

    def regex(self, pattern: str, top_k: int = 10, chunk_ids: Sequence[int] | None = None) -> list[Hit]:
        """Chunks by how many lines match `pattern`, most first."""
        rx = compile_pattern(pattern)
        counts = []
        for cid in chunk_ids if chunk_ids is not None else self.chunks:
            if cid in self.chunks:
                n = sum(1 for _ in rx.finditer(self.text(cid)))
                if n:
                    counts.append(Hit(cid, float(n)))
        counts.sort(key=lambda h: (-h.score, h.chunk_id))
        return counts[:top_k]

    def select(self, queries: Sequence[str], limit: int, per_query: int = 30) -> list[int]:
        """At most `limit` chunk ids: fused query rankings plus the error-line prior, each distinct
        error signature's best chunk first, then repeats round-robin (selection.py)."""
        fused: dict[int, float] = {}
        for q in queries:
            for rank, hit in enumerate(self.search(q, per_query)):
                fused[hit.chunk_id] = fused.get(hit.chunk_id, 0.0) + 1.0 / (RRF_K + rank + 1)
        for cid, n in self.error_lines().items():
            if n:
                fused[cid] = fused.get(cid, 0.0) + ERROR_WEIGHT * min(n, ERROR_CAP)
        signatures = self.error_signatures()
        # Shapes only for the query hits without error lines (per_query per query at most): a
        # template pass over every chunk would cost seconds on a large log.
        shapes = {cid: chunk_shape(self.text(cid)) for cid in fused if cid not in signatures}
        return select_diverse(fused, signatures, limit, shapes)

    def grep(self, pattern: str, chunk_ids: Sequence[int] | None = None, buffer_id: int | None = None,
             context_lines: int = 0) -> list[tuple[int, int, list[str]]]:
        """(chunk id, 1-based line of the match in its buffer, the lines around it) per match,
        at most MAX_GREP_HITS; a line repeated by overlapping chunks is reported once."""
        rx = compile_pattern(pattern)
        if buffer_id is not None and buffer_id not in self.buffers:
            raise ResearchInputError(f"no buffer {buffer_id}; list_buffers() shows the buffers")
        context_lines = max(0, min(context_lines, 10))
        ids = [cid for cid in (chunk_ids if chunk_ids is not None else sorted(self.chunks)) if cid in self.chunks]
        out: list[tuple[int, int, list[str]]] = []
        seen: set[tuple[int, int]] = set()
        for cid in ids:
            c = self.chunks[cid]
            if buffer_id is not None and c.buffer_id != buffer_id:
                continue
            lines = self.text(cid).split("\n")
            for i, line in enumerate(lines):
                if not rx.search(line):
                    continue
                at = (c.buffer_id, c.first_line + i)
                if at in seen:
                    continue
                seen.add(at)
                out.append((cid, at[1], lines[max(0, i - context_lines): i + context_lines + 1]))
                if len(out) >= MAX_GREP_HITS:
                    return out
        return out


def compile_pattern(pattern: str) -> re.Pattern[str]:
    if not pattern or len(pattern) > 500:
        raise ResearchInputError("pattern: expected 1 to 500 characters")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ResearchInputError(f"pattern {pattern[:80]!r} is not a valid regular expression: {exc}") from None


# What an index weighs per byte of its text, about (nbytes: 2.15 for a 40 MB log, 3 for 10 MB):
# the cache makes this much room before a build.
INDEX_BYTES_PER_TEXT_BYTE = 2

# Keyed by (tenant, card key, buffer ids and their blob refs): a new buffer makes a new index.
INDEXES: IndexCache[tuple[str, ...], ChunkIndex] = IndexCache(max_entries=4, size_of=lambda index: index.nbytes)


def index_key(tenant: str, card_key: str, buffers: Sequence[Buffer]) -> tuple[str, ...]:
    return (tenant, card_key, *(f"{b.buffer_id}:{b.blob_ref}:{b.chunk_tokens}:{b.overlap_lines}" for b in buffers))
