"""Blobs: text stored by content (ref "sha256:<hex>") per tenant, the claim checks that pass
through Temporal instead of large payloads. A ref is read back only with its tenant.

Blobs hold only what is ever needed redacted (rendered prompts, context items, whole build and
pod logs), so they are redacted here, on the way in, with the prompt core's redactor: a secret
in a log never reaches the database file, and the ref is the address of the redacted text
(`stored_text` says what a text becomes). The raw card as the board sent it is kept elsewhere
(see README, "Secrets at rest"). With the codec keys configured, each blob's bytes are also
encrypted (store/sealing.py); blobs written before that are still read as they are."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, select

from cardloop.prompts.redact import DEFAULT_REDACTOR
from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.sealing import open_blob
from cardloop.store.values import (
    NotFoundError,
    StoreError,
    blob_ref,
    check_blob_ref,
    check_tenant,
    decode_text,
    encode_text,
)


def stored_text(text: str) -> str:
    """What a blob keeps of `text`: every secret the redactor finds replaced by its marker."""
    return DEFAULT_REDACTOR.redact(text).text if text else text


class BlobsMixin(StoreBase):
    def put_blob(self, tenant: str, text: str, kind: str) -> str:
        """Store text, redacted, by content; return its ref 'sha256:<hex>' (of the redacted text).
        Idempotent: same text, same ref."""
        self._tenant(check_tenant(tenant))
        check_text("kind", kind, 64, required=True)
        text = stored_text(text)
        ref = blob_ref(text)
        with self._db.write(tenant) as conn:
            self._put_blobs(conn, tenant, {ref: (text, kind)})
        return ref

    def get_blob(self, ref: str, *, tenant: str | None = None) -> str:
        """The text `tenant` stored under `ref`; NotFoundError (a StoreError and KeyError) when missing.

        The tenant is required (a tenant view supplies its own): blobs are content-addressed
        per tenant, so a ref alone opens nothing. A content hash can be guessed by anyone who can
        guess the content; it must never be the permission to read another tenant's copy.
        """
        check_blob_ref(ref)
        tenant = tenant if tenant is not None else self._scope
        if tenant is None:
            raise StoreError(f"blob {ref}: name its tenant (get_blob(ref, tenant=...)); blobs are stored per tenant")
        tenant = self._tenant(check_tenant(tenant))
        query = select(s.blobs.c.data).where(s.blobs.c.tenant == tenant, s.blobs.c.ref == ref)
        with self._db.read(tenant) as conn:
            data = conn.execute(query).scalar_one_or_none()
        if data is None:
            raise NotFoundError(f"blob {ref} is not in the store")
        return decode_text(open_blob(self._sealer, tenant, ref, bytes(data)))

    def _put_blobs(self, conn: Connection, tenant: str, contents: Mapping[str, tuple[str, str]]) -> None:
        """`contents`: ref -> (text, kind) of texts already through `stored_text`."""
        # Sorted by ref: two transactions inserting overlapping sets then wait on each other in
        # the same order and cannot deadlock.
        for ref in sorted(contents):
            text, kind = contents[ref]
            data = encode_text(text)
            # size: the text's bytes, whether or not they are sealed (what quotas and reports mean).
            sealed = self._sealer.seal(tenant, ref, data) if self._sealer is not None else data
            row = {"ref": ref, "tenant": tenant, "kind": kind, "size": len(data), "data": sealed}
            self._insert_new(conn, s.blobs, row)
