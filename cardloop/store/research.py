"""Research buffers and chunks (migration 8): an artifact stored once as a blob, named and
numbered per card, and its chunks as spans of that text.

Idempotent where Temporal retries: storing the same named text with the same chunk settings
again returns the buffer stored first. Chunk ids are numbered per card across its buffers, so
one research run over several files still has one id per chunk."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select

from cardloop.prompts.research.chunks import Buffer, Chunk, ChunkSpan
from cardloop.store import schema as s
from cardloop.store.blobs import BlobsMixin
from cardloop.store.values import MAX_KEY, StoreError


class ResearchMixin(BlobsMixin):
    def put_buffer(self, card_key: str, name: str, blob_ref: str, spans: Sequence[ChunkSpan], *,
                   size: int, lines: int, chunk_tokens: int, overlap_lines: int) -> Buffer:
        """Register the blob `blob_ref` as the card's buffer `name`, chunked as `spans`; the
        buffer stored before for the same name, text and settings when there is one."""
        tenant = self._card_tenant(card_key)
        if not name or len(name) > MAX_KEY:
            raise StoreError(f"buffer name {name[:80]!r}: expected 1 to {MAX_KEY} characters")
        found = self.find_buffer(card_key, name, blob_ref, chunk_tokens, overlap_lines)
        if found is not None:
            return found
        b, c = s.research_buffers.c, s.research_chunks.c
        with self._db.write(tenant) as conn:
            self._lock_counter(conn, card_key, tenant)  # serializes buffer and chunk numbering per card
            buffer_id = int(conn.execute(select(func.coalesce(func.max(b.buffer_id), 0))
                                         .where(b.tenant == tenant, b.card_key == card_key)).scalar_one()) + 1
            first = int(conn.execute(select(func.coalesce(func.max(c.chunk_id), -1))
                                     .where(c.tenant == tenant, c.card_key == card_key)).scalar_one()) + 1
            inserted = self._insert_new(conn, s.research_buffers, {
                "tenant": tenant, "card_key": card_key, "buffer_id": buffer_id, "name": name, "blob_ref": blob_ref,
                "size": size, "lines": lines, "tokens": sum(sp.tokens for sp in spans), "chunk_tokens": chunk_tokens,
                "overlap_lines": overlap_lines})
            if inserted and spans:
                conn.execute(s.research_chunks.insert(), [
                    {"tenant": tenant, "card_key": card_key, "chunk_id": first + i, "buffer_id": buffer_id,
                     "first_line": sp.first_line, "last_line": sp.last_line, "start_char": sp.start,
                     "end_char": sp.end, "tokens": sp.tokens} for i, sp in enumerate(spans)])
        stored = self.find_buffer(card_key, name, blob_ref, chunk_tokens, overlap_lines)
        assert stored is not None
        return stored

    def find_buffer(self, card_key: str, name: str, blob_ref: str, chunk_tokens: int,
                     overlap_lines: int) -> Buffer | None:
        for buf in self.buffers(card_key):
            if (buf.name, buf.blob_ref, buf.chunk_tokens, buf.overlap_lines) == (name, blob_ref, chunk_tokens,
                                                                                  overlap_lines):
                return buf
        return None

    def buffers(self, card_key: str) -> list[Buffer]:
        """The card's buffers, in the order they were stored, with their chunk id ranges."""
        tenant = self._card_tenant(card_key)
        b, c = s.research_buffers.c, s.research_chunks.c
        counts = (select(c.buffer_id, func.min(c.chunk_id).label("first"), func.count().label("n"))
                  .where(c.tenant == tenant, c.card_key == card_key).group_by(c.buffer_id).subquery())
        query = (select(s.research_buffers, counts.c.first, counts.c.n)
                 .join_from(s.research_buffers, counts, counts.c.buffer_id == b.buffer_id, isouter=True)
                 .where(b.tenant == tenant, b.card_key == card_key).order_by(b.buffer_id))
        with self._db.read(tenant) as conn:
            rows = conn.execute(query).all()
        return [Buffer(int(r.buffer_id), r.name, r.blob_ref, int(r.size), int(r.lines), int(r.tokens),
                       int(r.chunk_tokens), int(r.overlap_lines), int(r.first or 0), int(r.n or 0)) for r in rows]

    def chunks(self, card_key: str, buffer_ids: Sequence[int] | None = None) -> list[Chunk]:
        """The chunks of the card's buffers (all, or those of `buffer_ids`), by chunk id."""
        tenant = self._card_tenant(card_key)
        c = s.research_chunks.c
        query = select(s.research_chunks).where(c.tenant == tenant, c.card_key == card_key)
        if buffer_ids is not None:
            query = query.where(c.buffer_id.in_(list(buffer_ids)))
        with self._db.read(tenant) as conn:
            rows = conn.execute(query.order_by(c.chunk_id)).all()
        return [Chunk(int(r.chunk_id), int(r.buffer_id), int(r.first_line), int(r.last_line), int(r.start_char),
                      int(r.end_char), int(r.tokens)) for r in rows]
