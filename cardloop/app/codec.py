"""Payload encryption: an AES-GCM PayloadCodec so card text, prompts, logs, chat and failure
messages never sit in plain text in Temporal's database.

Keys come from the environment as `kid1:base64key,kid2:base64key` (32-byte AES-256 keys): the
first encrypts, every one decrypts, so a key is rotated by putting a new one first and dropping
the old one once no open workflow holds payloads written with it. The key id travels in each
payload's metadata; the id is also the AES-GCM associated data, so a payload cannot be passed
off as written under another key.

Against a loopback address (the embedded `cardloop dev` stack) with no key in the environment,
the stack's own key in `<dev.data_dir>/codec.keys` is used, created on first use, so the dev
server's SQLite file is encrypted too and every local command reads it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes, PayloadCodec

from cardloop.app.private import private_dir
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.keyring import KeyRing

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
DEV_KEYS_FILE = "codec.keys"


class CodecError(ConfigError, ValueError):
    """A payload that cannot be decrypted: unknown key id, wrong key or altered bytes. A
    ConfigError for the CLI (one line, exit 2: this shell's key ring is not the workers')."""


class AesGcmCodec(PayloadCodec):
    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self._ciphers = {kid: AESGCM(key) for kid, key in ring.keys}
        self._current = ring.keys[0][0]

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        kid = self._current
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[kid].encrypt(nonce, payload.SerializeToString(), kid.encode())
        return Payload(metadata={"encoding": ENCODING, KEY_ID: kid.encode()}, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        # Payloads written before encryption was on (or by a plain client) pass through.
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        kid = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            hint = " (a `cardloop dev` key)" if kid.startswith("dev-") else ""
            raise CodecError(f"payload encrypted with key id {kid!r}{hint}, which is not among the configured "
                             f"keys {list(self.ring.ids)}: add it to the codec keys")
        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], kid.encode())
        except InvalidTag:
            raise CodecError(f"payload under key id {kid!r} does not authenticate: wrong key or altered data") from None
        return Payload.FromString(plain)


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def dev_keyring(config: Config) -> KeyRing:
    """The embedded stack's key, created (readable by this user only) on first use."""
    path = private_dir(Path(config.dev.data_dir).expanduser(), "dev.data_dir, CARDLOOP_DEV__DATA_DIR") / DEV_KEYS_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(KeyRing.generate(f"dev-{secrets.token_hex(4)}").to_text() + "\n")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # a directory there, a file overwritten with bytes ...
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the dev stack's payload key: {reason} (remove it: the next "
                          "command makes a new one, and payloads written with the old one cannot be read)") from None
    return KeyRing.parse(text, source=str(path))


def keyring(config: Config, *, address: str | None = None) -> KeyRing | None:
    """The configured keys; None when encryption is explicitly off."""
    t = config.temporal
    if not t.encrypt_payloads:
        return None
    secret = config.secret(t.codec_keys_env) if t.codec_keys_env else None
    if secret is not None:
        return KeyRing.parse(secret.reveal(), source=t.codec_keys_env)
    if is_loopback(address or t.address):
        return dev_keyring(config)
    raise ConfigError(f"temporal.encrypt_payloads is on but {t.codec_keys_env or 'temporal.codec_keys_env'} is not "
                      "set: give the workers' keys ('kid:base64key', `cardloop codec-key` makes one), or set "
                      "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS=false to store payloads in plain text")


def encrypting_converter(ring: KeyRing) -> DataConverter:
    # Failure messages and stack traces carry card text and logs too: the encoded-attributes
    # failure converter moves them into a payload, which the codec then encrypts.
    return dataclasses.replace(pydantic_data_converter, payload_codec=AesGcmCodec(ring),
                               failure_converter_class=DefaultFailureConverterWithEncodedAttributes)


def data_converter(config: Config, *, address: str | None = None) -> DataConverter:
    ring = keyring(config, address=address)
    return pydantic_data_converter if ring is None else encrypting_converter(ring)
