"""The payload codec: keys from the environment, rotation, refusals; the codec server's protocol,
auth and CORS; `cardloop codec-key`."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.app.codec import AesGcmCodec, CodecError, KeyRing, data_converter, keyring
from cardloop.app.codec_server import codec_app_for
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import CardloopError, ConfigError

OLD, NEW = KeyRing.generate("old"), KeyRing.generate("new")
PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"text": "card body with a password"}')


async def test_a_payload_round_trips_and_its_bytes_hide_the_text() -> None:
    codec = AesGcmCodec(OLD)
    [sealed] = await codec.encode([PLAIN])
    assert sealed.metadata["encoding"] == b"binary/encrypted" and sealed.metadata["encryption-key-id"] == b"old"
    assert b"password" not in sealed.SerializeToString()
    assert (await codec.decode([sealed])) == [PLAIN]
    [again] = await codec.encode([PLAIN])
    assert again.data != sealed.data  # a fresh nonce every time


async def test_rotation_the_first_key_encrypts_and_every_key_decrypts() -> None:
    [old_payload] = await AesGcmCodec(OLD).encode([PLAIN])
    rotated = AesGcmCodec(KeyRing(NEW.keys + OLD.keys))
    [new_payload] = await rotated.encode([PLAIN])
    assert new_payload.metadata["encryption-key-id"] == b"new"
    assert await rotated.decode([old_payload, new_payload]) == [PLAIN, PLAIN]
    # The CLI says it in one line with exit 2 (a shell whose key ring is not the workers'), not a traceback.
    assert issubclass(CodecError, CardloopError) and CodecError.exit_code == 2
    with pytest.raises(CodecError, match=r"key id 'old'.*not among the configured keys"):
        await AesGcmCodec(NEW).decode([old_payload])


async def test_altered_bytes_or_a_forged_key_id_do_not_decrypt() -> None:
    both = AesGcmCodec(KeyRing(NEW.keys + OLD.keys))
    [sealed] = await both.encode([PLAIN])
    tampered = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1]))
    with pytest.raises(CodecError, match="does not authenticate"):
        await both.decode([tampered])
    # The key id is the associated data: relabelling a payload under another id fails too.
    relabelled = Payload(metadata={**sealed.metadata, "encryption-key-id": b"old"}, data=sealed.data)
    with pytest.raises(CodecError, match="does not authenticate"):
        await both.decode([relabelled])


async def test_plain_payloads_written_before_encryption_pass_through() -> None:
    assert await AesGcmCodec(OLD).decode([PLAIN]) == [PLAIN]


@pytest.mark.parametrize(("text", "error"), [
    ("", "no keys"),
    ("nokey", "not 'kid:base64key'"),
    ("a b:c:" + base64.b64encode(b"x" * 32).decode(), "not 'kid:base64key'"),
    ("k1:not-base64!", "not valid base64"),
    ("k1:" + base64.b64encode(b"short").decode(), "has 5 bytes; AES-256 needs 32"),
    (f"k1:{base64.b64encode(b'x' * 32).decode()},k1:{base64.b64encode(b'y' * 32).decode()}", "appears twice"),
])
def test_bad_key_text_is_refused_naming_the_problem_never_the_key(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error) as info:
        KeyRing.parse(text)
    assert "eHh4" not in str(info.value)  # base64 of the key material never shows


def test_keys_come_from_the_environment_first_key_first(tmp_path: Path) -> None:
    text = KeyRing(NEW.keys + OLD.keys).to_text()
    config = load_config(REPO_CONFIG, env={"CARDLOOP_CODEC_KEYS": text, "CARDLOOP_DEV__DATA_DIR": str(tmp_path)})
    ring = keyring(config, address="temporal.prod:7233")
    assert ring is not None and ring.ids == ("new", "old")
    assert "base64" not in repr(ring) and text.split(":")[1][:8] not in repr(ring)
    assert not (tmp_path / "codec.keys").exists()


def test_without_keys_a_remote_temporal_is_refused_and_off_means_plain(tmp_path: Path) -> None:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_DEV__DATA_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="CARDLOOP_CODEC_KEYS is not set"):
        keyring(config, address="temporal.prod:7233")
    off = load_config(REPO_CONFIG, env={"CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"})
    assert keyring(off, address="temporal.prod:7233") is None
    assert data_converter(off) is pydantic_data_converter


def test_the_embedded_stack_makes_its_own_key_once_readable_by_its_user_only(tmp_path: Path) -> None:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_DEV__DATA_DIR": str(tmp_path / "data")})
    first = keyring(config, address="127.0.0.1:7233")
    again = keyring(config, address="localhost:7233")
    assert first == again and first is not None and first.ids[0].startswith("dev-")
    mode = stat.S_IMODE(os.stat(tmp_path / "data" / "codec.keys").st_mode)
    assert mode == 0o600


def codec_client(token: str | None, *, origins: list[str] | None = None) -> TestClient:
    env = {"CARDLOOP_CODEC_SERVER_TOKEN": token} if token else {}
    config = load_config(REPO_CONFIG, env=env)
    return TestClient(codec_app_for(config, AesGcmCodec(OLD), host="127.0.0.1", extra_origins=origins))


def as_json(*payloads: Payload) -> str:
    return json_format.MessageToJson(Payloads(payloads=payloads))


def test_codec_server_encodes_and_decodes_per_temporals_protocol() -> None:
    client = codec_client(None)
    encoded = client.post("/encode", content=as_json(PLAIN), headers={"x-namespace": "default"})
    assert encoded.status_code == 200
    sealed = json_format.Parse(encoded.text, Payloads()).payloads[0]
    assert sealed.metadata["encoding"] == b"binary/encrypted"
    decoded = client.post("/decode", content=encoded.text, headers={"content-type": "application/json"})
    assert json_format.Parse(decoded.text, Payloads()).payloads[0] == PLAIN


def test_codec_server_refuses_bad_bodies_and_unknown_keys_with_4xx() -> None:
    client = codec_client(None)
    assert client.post("/decode", content=b"{not json").status_code == 400
    [foreign] = [AesGcmCodec(NEW).encrypt(PLAIN)]
    answer = client.post("/decode", content=as_json(foreign))
    assert answer.status_code == 422 and "'new'" in answer.json()["detail"]


def test_codec_server_needs_its_token_when_one_is_set() -> None:
    client = codec_client("t0ken-for-codec")
    assert client.post("/decode", content=as_json(PLAIN)).status_code == 401
    assert client.post("/decode", content=as_json(PLAIN), headers={"authorization": "Bearer wrong"}).status_code == 401
    ok = client.post("/decode", content=as_json(PLAIN), headers={"authorization": "Bearer t0ken-for-codec"})
    assert ok.status_code == 200
    # The scheme is case-insensitive; the token is not.
    for header, status in (("bearer t0ken-for-codec", 200), ("BEARER  t0ken-for-codec", 200),
                           ("Bearer T0KEN-FOR-CODEC", 401), ("Basic t0ken-for-codec", 401), ("t0ken-for-codec", 401)):
        answer = client.post("/decode", content=as_json(PLAIN), headers={"authorization": header})
        assert answer.status_code == status, header


def test_codec_server_without_a_token_binds_loopback_only() -> None:
    config = load_config(REPO_CONFIG, env={})
    with pytest.raises(ConfigError, match="without a token would decrypt for anyone"):
        codec_app_for(config, AesGcmCodec(OLD), host="0.0.0.0")


def test_codec_server_admits_the_temporal_ui_origin_only() -> None:
    client = codec_client("tok", origins=["http://ui.example:8080"])
    preflight = {"access-control-request-method": "POST", "access-control-request-headers": "content-type,x-namespace"}
    ok = client.options("/decode", headers={"origin": "http://ui.example:8080", **preflight})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "http://ui.example:8080"
    other = client.options("/decode", headers={"origin": "http://evil.example", **preflight})
    assert "access-control-allow-origin" not in other.headers


def test_codec_key_command_prints_a_usable_key() -> None:
    cli = Path(sys.executable).parent / "cardloop"
    out = subprocess.run([str(cli), "codec-key", "--kid", "k2026"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    ring = KeyRing.parse(out.stdout.strip())
    assert ring.ids == ("k2026",) and len(ring.keys[0][1]) == 32
    bad = subprocess.run([str(cli), "codec-key", "--kid", "no spaces"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "letters, digits" in bad.stderr
