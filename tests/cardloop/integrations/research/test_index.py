"""The research index and the synthesizer's tools over real chunks of a generated CI log."""

from __future__ import annotations

import pytest

from cardloop.integrations.research.index import ChunkIndex
from cardloop.integrations.research.tools import NAMES, ResearchTools
from cardloop.integrations.sources.ranking import IndexCache
from cardloop.prompts.research.chunks import Buffer, Chunk, split_chunks
from cardloop.prompts.tokens import TokenCounter
from tests.research_log import ROOT_CAUSES, generate_log


@pytest.fixture(scope="module")
def index() -> ChunkIndex:
    text = generate_log(600_000)
    spans = split_chunks(text, TokenCounter().count, 1_000, 3)
    buf = Buffer(1, "ci.log", "sha256:x", len(text), text.count("\n"), sum(s.tokens for s in spans), 1_000, 3, 0,
                 len(spans))
    return ChunkIndex([buf], [Chunk(i, 1, s.first_line, s.last_line, s.start, s.end, s.tokens)
                              for i, s in enumerate(spans)], {1: text})


def test_selection_finds_the_planted_causes_among_noise(index: ChunkIndex) -> None:
    chosen = index.select(["FATAL", "FAILED test", "OOMKilled memory", "why did the build fail"], 12)
    assert len(chosen) == 12 < len(index.chunks)
    for cause in ROOT_CAUSES:
        assert any(cause in index.text(cid) for cid in chosen), cause


def test_grep_reports_buffer_lines_once_with_context(index: ChunkIndex) -> None:
    hits = index.grep(r"OOMKilled", context_lines=1)
    assert len(hits) == 1  # the overlap repeats lines; a match is reported once
    cid, line, around = hits[0]
    assert ROOT_CAUSES[2] in around[1] and len(around) == 3
    assert index.text(cid).split("\n")[line - index.chunks[cid].first_line].endswith(ROOT_CAUSES[2])


def test_tools_answer_as_data_and_refuse_bad_arguments(index: ChunkIndex) -> None:
    tools = ResearchTools(index, frozenset({0, 1}))
    text, err = tools.run("get_chunks", {"chunk_ids": [0, 10_000]})
    assert not err and text.startswith('<untrusted kind="log_chunk" source="ci.log lines 1-')
    assert "(no chunk 10000)" in text
    assert tools.chunks_read == {0}
    text, err = tools.run("search", {"query": "OOMKilled", "top_k": 3})
    assert not err and "chunk " in text
    text, err = tools.run("search", {"query": "FATAL:  remaining", "mode": "regex"})
    assert not err and "score 1" in text
    assert tools.run("grep_chunks", {"pattern": "(unclosed"})[1] is True
    assert tools.run("grep_chunks", {"pattern": "x", "buffer_id": 7})[1] is True
    assert tools.run("get_chunks", {"chunk_ids": "1,2"})[1] is True
    assert "buffers: 1; chunks:" in tools.run("storage_stats", {})[0] and "chunks analysed: 2" in tools.run(
        "storage_stats", {})[0]
    assert tools.run("get_buffer", {"name_or_id": "ci.log"})[0].startswith("buffer 1 'ci.log'")
    assert tools.run("list_buffers", {})[0].startswith('buffer 1: "ci.log"')
    assert tools.run("delete_everything", {})[1] is True
    assert {"get_chunks", "search", "grep_chunks", "get_buffer", "list_buffers", "storage_stats"} == NAMES


def _log_index(seed_text: str, size: int) -> ChunkIndex:
    text = seed_text + generate_log(size)
    spans = split_chunks(text, TokenCounter().count, 1_000, 3)
    buf = Buffer(1, "ci.log", f"sha256:{seed_text}", len(text), text.count("\n"), sum(s.tokens for s in spans),
                 1_000, 3, 0, len(spans))
    return ChunkIndex([buf], [Chunk(i, 1, s.first_line, s.last_line, s.start, s.end, s.tokens)
                              for i, s in enumerate(spans)], {1: text})


def test_an_index_is_charged_its_text_and_postings(index: ChunkIndex) -> None:
    text = index._texts[1]
    # The whole text plus the postings: for a small log some 7 times the text, for a 10 MB one 3
    # (its words repeat); a bound would be meaningless were it far off either way.
    assert 2 * len(text) < index.nbytes < 10 * len(text)


def test_the_research_cache_evicts_whole_indexes_by_bytes() -> None:
    """Real indexes of three logs in a cache bounded to a bit more than two of them: the third
    evicts the least recently used, and what is kept stays under the bound."""
    first, second, third = (_log_index(f"run {n}\n", 200_000) for n in range(3))
    bound = first.nbytes + second.nbytes + first.nbytes // 2
    cache: IndexCache[str, ChunkIndex] = IndexCache(max_entries=4, max_bytes=bound, size_of=lambda i: i.nbytes)
    cache.put("first", first)
    cache.put("second", second)
    assert cache.get("first") is first
    cache.put("third", third)
    assert cache.get("second") is None and cache.get("first") is first and cache.get("third") is third
    assert cache.nbytes == first.nbytes + third.nbytes <= bound
