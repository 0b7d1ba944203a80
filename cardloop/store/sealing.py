"""Blob contents encrypted at rest (AES-256-GCM) with the payload codec's keys, so a copied
database file is useless without them (issue 11, item 2).

On when the codec keys are configured (the variable `temporal.codec_keys_env` names) and
`store.encrypt_blobs` is not false: app/local.py's open_store passes the key ring to the store.
The first key seals; every key opens, so the codec's rotation (new key first, old key kept until
nothing written with it is read) holds for blobs too.

A sealed blob is MAGIC, the key id's length (one byte) and id, a 12-byte nonce, then the AES-GCM
ciphertext and tag. MAGIC begins with bytes no UTF-8 text has (NUL, 0xFF), so a blob stored in
plain text before encryption was on is told apart and still read. The associated data binds
the ciphertext to its tenant, its ref and its key id: a row copied under another tenant or ref
does not decrypt. The ref itself (the SHA-256 of the redacted text) stays readable: it is the
primary key, and it tells only whether a guessed text was stored.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cardloop.contracts.keyring import KeyRing
from cardloop.store.values import StoreError

MAGIC = b"\x00\xffcardloop-sealed-1\x00"
NONCE_BYTES = 12


def is_sealed(data: bytes) -> bool:
    return data.startswith(MAGIC)


def sealed_key_id(data: bytes) -> str | None:
    """The key id a sealed blob names in its header; None for a blob stored in plain text."""
    if not is_sealed(data):
        return None
    body = data[len(MAGIC):]
    n = body[0] if body else 0
    return body[1:1 + n].decode("ascii", errors="replace")


def _aad(tenant: str, ref: str, kid: str) -> bytes:
    return b"\x00".join((b"cardloop-blob", tenant.encode(), ref.encode(), kid.encode()))


class BlobSealer:
    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self._ciphers = {kid: AESGCM(key) for kid, key in ring.keys}
        self._current = ring.keys[0][0]

    def __repr__(self) -> str:
        return f"BlobSealer(ids={list(self.ring.ids)})"

    def seal(self, tenant: str, ref: str, data: bytes) -> bytes:
        kid = self._current
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[kid].encrypt(nonce, data, _aad(tenant, ref, kid))
        return MAGIC + bytes([len(kid)]) + kid.encode() + nonce + sealed

    def open(self, tenant: str, ref: str, data: bytes) -> bytes:
        return open_blob(self, tenant, ref, data)


def open_blob(sealer: BlobSealer | None, tenant: str, ref: str, data: bytes) -> bytes:
    """The plain bytes of a stored blob: a blob from before encryption as it is, a sealed one
    decrypted. StoreError when it is sealed and cannot be opened (no keys, unknown key, altered)."""
    if not is_sealed(data):
        return data
    body = data[len(MAGIC):]
    n = body[0] if body else 0
    kid = sealed_key_id(data) or ""
    if sealer is None:
        raise StoreError(f"blob {ref} of tenant {tenant!r} is encrypted (key id {kid!r}) and this store has no "
                         "keys: set the codec keys (temporal.codec_keys_env) to read it")
    cipher = sealer._ciphers.get(kid)
    if cipher is None:
        raise StoreError(f"blob {ref} of tenant {tenant!r} is encrypted with key id {kid!r}, which is not among "
                         f"the configured keys {list(sealer.ring.ids)}: add it to the codec keys")
    rest = body[1 + n:]
    try:
        return cipher.decrypt(rest[:NONCE_BYTES], rest[NONCE_BYTES:], _aad(tenant, ref, kid))
    except InvalidTag:
        raise StoreError(f"blob {ref} of tenant {tenant!r} does not authenticate under key id {kid!r}: "
                         "wrong key, altered bytes, or a row moved to another tenant or ref") from None
