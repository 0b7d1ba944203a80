"""Chunk selection over real chunks and a real index: an error repeated thousands of times must
not crowd out the rare ones, whatever the noise looks like (the bench's CI log, a Java service
with stack traces, a pod log of readiness-probe failures)."""

from __future__ import annotations

from collections import Counter

import pytest

from cardloop.integrations.research.index import ChunkIndex
from cardloop.integrations.research.selection import chunk_shape, error_signature, select_diverse
from cardloop.prompts.research.chunks import Buffer, Chunk, split_chunks
from cardloop.prompts.tokens import TokenCounter
from tests.research_log import ROOT_CAUSES, generate_log
from tests.research_noise import JAVA_CAUSES, POD_CAUSES, java_log, pod_log

# What the planner of a vague question asks for: words every repeat of the noise has too.
VAGUE = ["error exception", "failed", "why did the service fail"]


def _index(text: str, chunk_tokens: int) -> ChunkIndex:
    spans = split_chunks(text, TokenCounter().count, chunk_tokens, 1)
    buf = Buffer(1, "x.log", "sha256:x", len(text), text.count("\n"), sum(s.tokens for s in spans), chunk_tokens,
                 1, 0, len(spans))
    return ChunkIndex([buf], [Chunk(i, 1, s.first_line, s.last_line, s.start, s.end, s.tokens)
                              for i, s in enumerate(spans)], {1: text})


def _named(index: ChunkIndex, chosen: list[int], causes: tuple[str, ...]) -> list[str]:
    return [c for c in causes if not any(c in index.text(cid) for cid in chosen)]


def test_signatures_mask_what_varies_and_keep_what_differs() -> None:
    a = error_signature('[pod/api-7d9f8-x2k4q/api] 2026-11-26T10:00:01.123Z {"level":"error","msg":"probe failed",'
                        '"status":503,"request_id":"0a1b2c3d4e5f"}')
    b = error_signature('[pod/api-5c6b7-q2w9z/api] 2026-11-26T11:59:59.999Z {"level":"error","msg":"probe failed",'
                        '"status":502,"request_id":"ffeeddccbbaa"}')
    assert a == b and "probe failed" in a and "2026" not in a
    assert error_signature("ERROR GET /accounts/17 failed after 0x7ffe ms, id 3f2a9c1e-0b4d-4e6f-8a7b-1c2d3e4f5a6b") \
        == error_signature("ERROR GET /accounts/9921 failed after 0x10 ms, id 00000000-1111-2222-3333-444444444444")
    assert error_signature("psycopg.OperationalError: connection refused") \
        != error_signature("psycopg.OperationalError: remaining connection slots are reserved")


def test_each_signature_gets_a_chunk_before_any_repeat() -> None:
    noise = frozenset({"ERROR timeout <n>"})
    scores = {cid: 1.0 - cid / 1000 for cid in range(100)}  # the noise outscores everything
    sigs = {cid: noise for cid in range(100)} | {500: frozenset({"FATAL disk full"}), 900: frozenset({"panic: nil"})}
    scores[500] = 0.001  # ranked, but last
    # The rare errors first (900 has no score: still a chance), then the noise's best chunk.
    assert select_diverse(scores, sigs, 3) == [500, 900, 0]
    assert select_diverse(scores, sigs, 2) == [500, 900]  # no room for all: the rarest win
    # Past the distinct signatures, the best of what is left, one copy per kind a round.
    more = select_diverse(scores | {200: 0.5, 201: 0.4}, sigs, 6)
    assert more[:3] == [500, 900, 0] and more[3:] == [200, 201, 1]
    assert len(select_diverse(scores, sigs, 40)) == 40 and select_diverse(scores, sigs, 0) == []


@pytest.mark.parametrize(("make", "causes"), [(java_log, JAVA_CAUSES), (pod_log, POD_CAUSES)], ids=["java", "pod"])
def test_rare_causes_survive_thousands_of_one_noisy_error(make, causes) -> None:
    # A 40 MB log's proportions at 2 MB: thousands of chunks, 10 analysed (at most 0.4%, as 40 of
    # 8,414). Ranking alone (before the signatures) missed one Java cause and both pod causes.
    index = _index(make(2 * 1024 * 1024), 300)
    assert len(index.chunks) > 2_000
    seen = Counter(sig for sigs in index.error_signatures().values() for sig in sigs)
    assert seen.most_common(1)[0][1] > 1_000  # the noise is one error, seen in most chunks
    assert len(seen) < 10  # and its repeats are one signature each, whatever ids they carry
    chosen = index.select(VAGUE, 10)
    assert len(chosen) == 10
    assert not _named(index, chosen, causes)


def test_the_bench_log_at_40_mb_proportions_names_all_three_causes() -> None:
    # generate_log's density of benign errors, ~1,700 chunks of 1,000 tokens, 8 analysed (0.48%,
    # as 40 of 8,414 at 40 MB); ranking alone missed the OOMKilled cause here, as in the bench.
    index = _index(generate_log(4 * 1024 * 1024), 1_000)
    assert len(index.chunks) > 1_500
    chosen = index.select(["error exception traceback", "FATAL", "why did this CI run fail"], 8)
    assert not _named(index, chosen, ROOT_CAUSES)


def test_copies_of_one_noise_template_take_turns() -> None:
    def noise(step: int) -> str:
        return "\n".join(f"2026-11-26T10:00:{s:02d}Z INFO [worker] migration ok, shard {s * step}" for s in range(40))

    odd = noise(7) + "\n2026-11-26T10:01:00Z WARN [migrate] migration 0042_add_index skipped: lock not acquired"
    assert chunk_shape(noise(7)) == chunk_shape(noise(13)) != chunk_shape(odd)
    # Twenty copies of the noise outscore the odd chunk, which has no error line either.
    scores = {cid: 1.0 - cid / 100 for cid in range(20)} | {50: 0.1}
    shapes = {cid: chunk_shape(noise(cid + 1)) for cid in range(20)} | {50: chunk_shape(odd)}
    assert select_diverse(scores, {}, 3, shapes) == [0, 50, 1]
    assert select_diverse(scores, {}, 3) == [0, 1, 2]  # without shapes: by score alone
