"""Research buffers and chunks in the store (migration 8), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from cardloop.prompts.card import Card
from cardloop.prompts.research.chunks import split_chunks
from cardloop.store import Store, TenantScopeError

KEY = "acme/cli/research-1"


def _card(store: Store, key: str = KEY) -> None:
    tenant, board, card_id = key.split("/")
    store.upsert_card(key, Card(id=card_id, tenant=tenant, board=board, title="research"))


def test_buffers_are_stored_once_and_chunk_ids_run_across_buffers(store: Store) -> None:
    _card(store)
    text = "".join(f"line {i} of the build log\n" for i in range(500))
    spans = split_chunks(text, lambda t: len(t) // 4, 300, 2)
    ref = store.put_blob("acme", text, "research")
    first = store.put_buffer(KEY, "build.log", ref, spans, size=len(text), lines=500, chunk_tokens=300,
                             overlap_lines=2)
    again = store.put_buffer(KEY, "build.log", ref, spans, size=len(text), lines=500, chunk_tokens=300,
                             overlap_lines=2)
    pods = store.put_buffer(KEY, "pods.log", ref, spans[:3], size=len(text), lines=500, chunk_tokens=300,
                            overlap_lines=2)
    assert again == first and first.buffer_id == 1 and pods.buffer_id == 2
    assert (first.first_chunk, first.chunks, pods.first_chunk, pods.chunks) == (0, len(spans), len(spans), 3)
    chunks = store.chunks(KEY)
    assert [c.chunk_id for c in chunks] == list(range(len(spans) + 3))
    c = store.chunks(KEY, [1])[1]
    assert text[c.start:c.end] == text[spans[1].start:spans[1].end] and c.first_line == spans[1].first_line
    assert [b.name for b in store.buffers(KEY)] == ["build.log", "pods.log"]


def test_a_tenant_view_sees_only_its_own_buffers(store: Store) -> None:
    _card(store)
    _card(store, "globex/cli/research-1")
    ref = store.put_blob("acme", "x\n", "research")
    store.put_buffer(KEY, "a.log", ref, [], size=2, lines=1, chunk_tokens=64, overlap_lines=0)
    assert store.for_tenant("globex").buffers("globex/cli/research-1") == []
    with pytest.raises(TenantScopeError):
        store.for_tenant("globex").buffers(KEY)
