"""The synthesizer's tools over a card's research buffers: get_chunks, search, grep_chunks,
get_buffer, list_buffers and storage_stats.

Only tool calls the model makes as structured tool_use blocks run here: text that merely
looks like a tool call (inside findings or a chunk) is never parsed. Results quote the
artifact, so each is wrapped as untrusted data with its provenance and bounded in size.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cardloop.integrations.research.index import ChunkIndex, ResearchInputError
from cardloop.prompts.conversation import ToolSpec
from cardloop.prompts.isolate import wrap_untrusted

MAX_RESULT_CHARS = 24_000
MAX_CHUNKS_PER_CALL = 6

SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("get_chunks", "Read chunks of the artifacts by id (at most 6 per call).",
             {"type": "object", "properties": {"chunk_ids": {"type": "array", "items": {"type": "integer"}}},
              "required": ["chunk_ids"]}),
    ToolSpec("search", "Find chunks: mode 'bm25' (lexical, default) or 'regex' (by matching lines).",
             {"type": "object", "properties": {"query": {"type": "string"},
                                               "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
                                               "mode": {"type": "string", "enum": ["bm25", "regex"]}},
              "required": ["query"]}),
    ToolSpec("grep_chunks", "Lines matching a regular expression, optionally only in some chunks or one buffer, "
                            "with context lines around each match.",
             {"type": "object", "properties": {"pattern": {"type": "string"},
                                               "chunk_ids": {"type": "array", "items": {"type": "integer"}},
                                               "buffer_id": {"type": "integer"},
                                               "context_lines": {"type": "integer", "minimum": 0, "maximum": 10}},
              "required": ["pattern"]}),
    ToolSpec("get_buffer", "One artifact's facts (size, lines, tokens, chunk ids) and its first lines, by name or id.",
             {"type": "object", "properties": {"name_or_id": {"type": ["string", "integer"]}},
              "required": ["name_or_id"]}),
    ToolSpec("list_buffers", "The artifacts stored for this research.", {"type": "object", "properties": {}}),
    ToolSpec("storage_stats", "Totals: buffers, chunks, bytes, tokens, chunks analysed.",
             {"type": "object", "properties": {}}),
)
NAMES = frozenset(spec.name for spec in SPECS)


class ResearchTools:
    def __init__(self, index: ChunkIndex, analysed: frozenset[int] = frozenset()) -> None:
        self.index = index
        self.analysed = analysed
        self.calls = 0
        self.chunks_read: set[int] = set()

    def run(self, name: str, args: Mapping[str, Any]) -> tuple[str, bool]:
        """(result text, is_error). Bad arguments are an error result the model can correct."""
        self.calls += 1
        handlers: dict[str, Callable[[Mapping[str, Any]], str]] = {
            "get_chunks": self._get_chunks, "search": self._search, "grep_chunks": self._grep,
            "get_buffer": self._get_buffer, "list_buffers": self._list_buffers, "storage_stats": self._stats}
        handler = handlers.get(name)
        if handler is None:
            return f"unknown tool {name!r}; available: {', '.join(sorted(NAMES))}", True
        try:
            text = handler(args)
        except (ResearchInputError, TypeError, ValueError) as exc:
            return f"{name}: {exc}", True
        return (text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[… cut]"), False

    def _ids(self, value: Any, what: str = "chunk_ids") -> list[int]:
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ResearchInputError(f"{what}: expected a list of integers")
        return value

    def _get_chunks(self, args: Mapping[str, Any]) -> str:
        ids = self._ids(args.get("chunk_ids"))[:MAX_CHUNKS_PER_CALL]
        parts = []
        for cid in ids:
            if cid not in self.index.chunks:
                parts.append(f"(no chunk {cid})")
                continue
            self.chunks_read.add(cid)
            parts.append(wrap_untrusted(self.index.text(cid), kind="log_chunk", source=self.index.where(cid),
                                        chunk_id=str(cid)))
        return "\n".join(parts) or "(no chunk ids given)"

    def _search(self, args: Mapping[str, Any]) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ResearchInputError("query: expected a non-empty string")
        top_k = max(1, min(int(args.get("top_k") or 10), 50))
        mode = args.get("mode") or "bm25"
        if mode not in ("bm25", "regex"):
            raise ResearchInputError("mode: 'bm25' or 'regex'")
        hits = self.index.search(query, top_k) if mode == "bm25" else self.index.regex(query, top_k)
        rows = [f"chunk {h.chunk_id} ({self.index.where(h.chunk_id)}) score {h.score:.3g}" for h in hits]
        return wrap_untrusted("\n".join(rows) or "no matching chunks", kind="search_result", source=f"{mode} search")

    def _grep(self, args: Mapping[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str):
            raise ResearchInputError("pattern: expected a string")
        ids = self._ids(args["chunk_ids"]) if args.get("chunk_ids") is not None else None
        buffer_id = args.get("buffer_id")
        if buffer_id is not None and (not isinstance(buffer_id, int) or isinstance(buffer_id, bool)):
            raise ResearchInputError("buffer_id: expected an integer")
        hits = self.index.grep(pattern, ids, buffer_id, int(args.get("context_lines") or 0))
        out = []
        for cid, line, around in hits[:60]:
            name = self.index.buffers[self.index.chunks[cid].buffer_id].name
            out.append(f"{name}:{line} (chunk {cid})\n" + "\n".join(around))
        more = f"\n[{len(hits) - 60} more matches not shown]" if len(hits) > 60 else ""
        return wrap_untrusted("\n".join(out) + more if out else "no matches", kind="grep_result",
                              source=f"grep {pattern[:100]}")

    def _get_buffer(self, args: Mapping[str, Any]) -> str:
        key = args.get("name_or_id", args.get("name", args.get("id")))
        buf = next((b for b in self.index.buffers.values() if key in (b.buffer_id, b.name, str(b.buffer_id))), None)
        if buf is None:
            raise ResearchInputError(f"no buffer {key!r}; list_buffers() shows the buffers")
        head = "\n".join(self.index._texts[buf.buffer_id][:4_000].split("\n")[:40])
        facts = (f"buffer {buf.buffer_id} {buf.name!r}: {buf.size:,} bytes, {buf.lines:,} lines, "
                 f"~{buf.tokens:,} tokens, "
                 f"chunks {buf.first_chunk}-{buf.first_chunk + buf.chunks - 1}")
        return facts + "\n" + wrap_untrusted(head, kind="buffer_head", source=buf.name)

    def _list_buffers(self, args: Mapping[str, Any]) -> str:
        return "\n".join(f"buffer {b.buffer_id}: {json.dumps(b.name)} {b.lines:,} lines, {b.chunks} chunks "
                         f"({b.first_chunk}-{b.first_chunk + b.chunks - 1})" for b in self.index.buffers.values())

    def _stats(self, args: Mapping[str, Any]) -> str:
        bufs = self.index.buffers.values()
        return (f"buffers: {len(bufs)}; chunks: {len(self.index.chunks)}; bytes: {sum(b.size for b in bufs):,}; "
                f"tokens: {sum(b.tokens for b in bufs):,}; chunks analysed: {len(self.analysed)}")
