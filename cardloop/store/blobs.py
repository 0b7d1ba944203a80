"""Blobs: text stored by content (ref "sha256:<hex>") per tenant, the claim checks that pass
through Temporal instead of large payloads."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, select

from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.values import NotFoundError, blob_ref, check_blob_ref, check_tenant, decode_text, encode_text


class BlobsMixin(StoreBase):
    def put_blob(self, tenant: str, text: str, kind: str) -> str:
        """Store text by content; return its ref 'sha256:<hex>'. Idempotent: same text, same ref."""
        self._tenant(check_tenant(tenant))
        check_text("kind", kind, 64, required=True)
        ref = blob_ref(text)
        with self._db.write(tenant) as conn:
            self._put_blobs(conn, tenant, {ref: (text, kind)})
        return ref

    def get_blob(self, ref: str, *, tenant: str | None = None) -> str:
        """The text stored under `ref`; NotFoundError (a StoreError and KeyError) when missing.

        With a tenant (or on a tenant view) only that tenant's copy is read. Without one, the ref
        itself is the permission: a worker holds it from its own workflow's payload, and the
        database lets a transaction read the blob whose ref it names, never list blobs.
        """
        check_blob_ref(ref)
        tenant = self._tenant(check_tenant(tenant)) if tenant is not None else self._scope
        query = select(s.blobs.c.data).where(s.blobs.c.ref == ref)
        if tenant is not None:
            query = query.where(s.blobs.c.tenant == tenant)
        scope = self._db.read(tenant) if tenant is not None else self._db.read(blob_ref=ref)
        with scope as conn:
            data = conn.execute(query.limit(1)).scalar_one_or_none()
        if data is None:
            raise NotFoundError(f"blob {ref} is not in the store")
        return decode_text(bytes(data))

    def _put_blobs(self, conn: Connection, tenant: str, contents: Mapping[str, tuple[str, str]]) -> None:
        # Sorted by ref: two transactions inserting overlapping sets then wait on each other in
        # the same order and cannot deadlock.
        for ref in sorted(contents):
            text, kind = contents[ref]
            data = encode_text(text)
            row = {"ref": ref, "tenant": tenant, "kind": kind, "size": len(data), "data": data}
            self._insert_new(conn, s.blobs, row)
