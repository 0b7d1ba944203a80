"""AES-256 keys by id, the encrypting one first: the key management the Temporal payload codec
(app/codec.py) and the store's blob encryption (store/sealing.py) share.

Keys come as `kid1:base64key,kid2:base64key` (32-byte keys, from the environment variable that
`temporal.codec_keys_env` names): the first encrypts, every one decrypts, so a key is rotated by
putting a new one first and dropping the old one once nothing written with it is still read.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cardloop.contracts.errors import ConfigError

_KID = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


@dataclasses.dataclass(frozen=True)
class KeyRing:
    """Key ids and keys, the encrypting one first."""

    keys: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigError("codec keys: none given")

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self.ids)})"

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(kid for kid, _ in self.keys)

    @classmethod
    def parse(cls, text: str, source: str = "CARDLOOP_CODEC_KEYS") -> KeyRing:
        keys: list[tuple[str, bytes]] = []
        for i, item in enumerate(t for t in re.split(r"[,\s]+", text.strip()) if t):
            kid, sep, b64 = item.partition(":")
            if not sep or not _KID.match(kid):
                raise ConfigError(f"{source}: entry {i + 1} is not 'kid:base64key' (kid: letters, digits, . _ -)")
            try:
                key = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError(f"{source}: key {kid!r} is not valid base64") from None
            if len(key) != 32:
                raise ConfigError(f"{source}: key {kid!r} has {len(key)} bytes; AES-256 needs 32 "
                                  "(`cardloop codec-key` makes one)")
            if kid in dict(keys):
                raise ConfigError(f"{source}: key id {kid!r} appears twice")
            keys.append((kid, key))
        if not keys:
            raise ConfigError(f"{source}: no keys (expected 'kid1:base64key,kid2:base64key')")
        return cls(tuple(keys))

    @classmethod
    def generate(cls, kid: str) -> KeyRing:
        if not _KID.match(kid):
            raise ConfigError(f"key id {kid!r}: letters, digits, . _ - only (at most 64)")
        return cls(((kid, AESGCM.generate_key(bit_length=256)),))

    def to_text(self) -> str:
        return ",".join(f"{kid}:{base64.b64encode(key).decode()}" for kid, key in self.keys)
