"""Blob contents encrypted at rest with the payload codec's keys (store/sealing.py): checked on a
real SQLite file by reading its bytes, then by opening the copied file without the keys, with
other keys, after a rotation, and with rows moved between tenants."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine

from cardloop.app.local import blob_keys, open_store
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.keyring import KeyRing
from cardloop.prompts.card import Card, ContextItem, ContextKind
from cardloop.store import Store, StoreError
from tests.postgres import deployment, schema_url

KEY = "acme/github/PAY-7"
# Plain text no redactor touches: what must not be readable from a copied file.
PLAIN = "The quarterly migration plan moves the ledger to the Frankfurt region on 3 March."
LOG = "step 4/9: compiling the billing reconciler for the Frankfurt region\n"


def _file_bytes(path: Path) -> bytes:
    """The database file and every file SQLite keeps beside it (-wal, -shm, -journal)."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def _fill(store: Store) -> str:
    store.upsert_card(KEY, Card(id="PAY-7", tenant="acme", board="github", title="Move the ledger"))
    store.put_context_items(KEY, [ContextItem(kind=ContextKind.BUILD_LOG, source="ci", title="build", content=LOG,
                                              created_at=datetime(2026, 1, 2, tzinfo=UTC))])
    return store.put_blob("acme", PLAIN, "prompt")


def test_sealed_blobs_leave_no_plain_text_in_the_file_and_read_back(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    ring = KeyRing.generate("k1")
    store = Store.open(f"sqlite:///{db}", blob_keys=ring)
    try:
        ref = _fill(store)
        assert store.get_blob(ref, tenant="acme") == PLAIN
        assert [c.content for c in store.context_items(KEY)] == [LOG]
        assert store.blob_key_ids == ("k1",)
    finally:
        store.close()
    raw = _file_bytes(db)
    assert PLAIN.encode() not in raw and b"Frankfurt" not in raw
    assert b"cardloop-sealed-1" in raw  # the blobs are there, sealed


def test_a_copied_file_is_useless_without_the_keys(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    store = Store.open(f"sqlite:///{db}", blob_keys=KeyRing.generate("k1"))
    try:
        ref = _fill(store)
    finally:
        store.close()
    copy = tmp_path / "copied.sqlite"
    shutil.copy(db, copy)
    thief = Store.open(f"sqlite:///{copy}")
    try:
        with pytest.raises(StoreError, match=r"is encrypted \(key id 'k1'\) and this store has no keys"):
            thief.get_blob(ref, tenant="acme")
        with pytest.raises(StoreError, match="encrypted"):
            thief.context_items(KEY)
    finally:
        thief.close()
    other = Store.open(f"sqlite:///{copy}", blob_keys=KeyRing.generate("k2"))
    try:
        with pytest.raises(StoreError, match=r"key id 'k1', which is not among the configured keys \['k2'\]"):
            other.get_blob(ref, tenant="acme")
    finally:
        other.close()


def test_blobs_from_before_encryption_are_still_read_and_rotation_keeps_old_keys(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    url = f"sqlite:///{db}"
    plain_store = Store.open(url)
    try:
        old_ref = plain_store.put_blob("acme", "written before encryption was on", "log")
    finally:
        plain_store.close()
    old, new = KeyRing.generate("k1"), KeyRing.generate("k2")
    first = Store.open(url, blob_keys=old)
    try:
        k1_ref = first.put_blob("acme", "sealed under k1", "log")
    finally:
        first.close()
    rotated = Store.open(url, blob_keys=KeyRing(new.keys + old.keys))  # new key first, the old one kept
    try:
        k2_ref = rotated.put_blob("acme", "sealed under k2", "log")
        assert rotated.get_blob(old_ref, tenant="acme") == "written before encryption was on"
        assert rotated.get_blob(k1_ref, tenant="acme") == "sealed under k1"
        assert rotated.get_blob(k2_ref, tenant="acme") == "sealed under k2"
    finally:
        rotated.close()
    with sqlite3.connect(db) as conn:
        kinds = {ref: data[:2] for ref, data in conn.execute("SELECT ref, data FROM blobs")}
    assert kinds[old_ref] == b"wr" and kinds[k1_ref] == kinds[k2_ref] == b"\x00\xff"


def test_a_sealed_row_moved_to_another_tenant_or_altered_does_not_open(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    ring = KeyRing.generate("k1")
    store = Store.open(f"sqlite:///{db}", blob_keys=ring)
    try:
        ref = store.put_blob("acme", PLAIN, "prompt")
        with sqlite3.connect(db) as conn:
            (data,) = conn.execute("SELECT data FROM blobs WHERE ref = ?", (ref,)).fetchone()
            conn.execute("INSERT INTO blobs (ref, tenant, kind, size, data) VALUES (?, 'globex', 'prompt', 1, ?)",
                         (ref, data))
            flipped = bytes(data[:-1]) + bytes([data[-1] ^ 1])
            conn.execute("UPDATE blobs SET data = ? WHERE ref = ? AND tenant = 'acme'", (flipped, ref))
        with pytest.raises(StoreError, match="a row moved to another tenant or ref"):
            store.get_blob(ref, tenant="globex")
        with pytest.raises(StoreError, match="does not authenticate"):
            store.get_blob(ref, tenant="acme")
    finally:
        store.close()


def test_open_store_encrypts_only_when_the_codec_keys_are_configured(tmp_path: Path) -> None:
    ring = KeyRing.generate("ops-1")
    base = {"CARDLOOP_STORE__URL": f"sqlite:///{tmp_path}/s.sqlite", "CARDLOOP_DEV__DATA_DIR": str(tmp_path)}
    off = load_config(REPO_CONFIG, env=base)
    assert blob_keys(off) is None
    on = load_config(REPO_CONFIG, env=base | {"CARDLOOP_CODEC_KEYS": ring.to_text()})
    assert blob_keys(on) is not None
    with open_store(on) as store:
        assert store.blob_key_ids == ("ops-1",)
        ref = store.put_blob("acme", PLAIN, "prompt")
        assert store.for_tenant("acme").get_blob(ref) == PLAIN  # tenant views share the keys
    assert PLAIN.encode() not in _file_bytes(tmp_path / "s.sqlite")
    opted_out = load_config(REPO_CONFIG, env=base | {"CARDLOOP_CODEC_KEYS": ring.to_text(),
                                                      "CARDLOOP_STORE__ENCRYPT_BLOBS": "false"})
    assert blob_keys(opted_out) is None
    broken = load_config(REPO_CONFIG, env=base | {"CARDLOOP_CODEC_KEYS": "k1:not-base64!"})
    with pytest.raises(ConfigError, match="CARDLOOP_CODEC_KEYS: key 'k1' is not valid base64"):
        blob_keys(broken)


@pytest.mark.postgres
def test_sealed_blobs_on_postgresql_as_the_application_role(postgres_admin: Engine) -> None:
    # BYTEA holds the sealed bytes; row-level security and the seal's tenant binding agree.
    ring = KeyRing.generate("pg-1")
    with deployment(postgres_admin, "sealed") as (schema, owner, app_role):
        Store.provision_postgres_role(schema_url(schema, owner), app_role)
        store = Store.open(schema_url(schema, app_role), blob_keys=ring)
        try:
            ref = _fill(store)
            assert store.for_tenant("acme").get_blob(ref) == PLAIN
            assert [c.content for c in store.context_items(KEY)] == [LOG]
        finally:
            store.close()
        with postgres_admin.connect() as conn:
            raw = conn.exec_driver_sql(f"SELECT data FROM {schema}.blobs").scalars().all()
        assert raw and all(bytes(d).startswith(b"\x00\xff") and PLAIN.encode() not in bytes(d) for d in raw)
