"""`cardloop store reseal`: the last step of a key rotation, as an operator runs it, against a real
SQLite file and a real PostgreSQL deployment (row-level security, the application role)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine

from cardloop.contracts.keyring import KeyRing
from cardloop.store import Store, StoreError
from cardloop.store.sealing import sealed_key_id
from tests.cardloop.app.cli.inproc import run_cli
from tests.conftest import ROOT
from tests.postgres import deployment, schema_url

CLI = Path(sys.executable).parent / "cardloop"


def reseal(url: str, ring: KeyRing | None, home: Path, *args: str,
           script: bool = False) -> subprocess.CompletedProcess[str]:
    """In this process (inproc.py says why), or with SCRIPT as the installed script in a process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_")}
    env |= {"DATABASE_URL": url, "HOME": str(home), "CARDLOOP_DEV__DATA_DIR": str(home / "data")}
    if ring is not None:
        env["CARDLOOP_CODEC_KEYS"] = ring.to_text()
    if not script:
        return run_cli(["store", "reseal", *args], env=env)
    return subprocess.run([str(CLI), "store", "reseal", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


def key_ids(db: Path) -> dict[tuple[str, str], str | None]:
    with sqlite3.connect(db) as conn:
        return {(tenant, ref): sealed_key_id(bytes(data)) for tenant, ref, data in
                conn.execute("SELECT tenant, ref, data FROM blobs")}


def test_a_rotation_ends_with_every_blob_under_the_new_key(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    url = f"sqlite:///{db}"
    old, new = KeyRing.generate("k1"), KeyRing.generate("k2")
    texts = {"acme": [f"acme log {i}" for i in range(7)], "globex": ["globex prompt"]}
    with Store.open(url) as plain:  # before encryption was on
        before = plain.put_blob("acme", "written in plain text", "log")
    refs: dict[str, list[str]] = {}
    with Store.open(url, blob_keys=old) as store:
        for tenant, items in texts.items():
            refs[tenant] = [store.put_blob(tenant, text, "log") for text in items]
    assert set(key_ids(db).values()) == {None, "k1"}

    rotated = KeyRing(new.keys + old.keys)  # new key first, the old one kept
    out = reseal(url, rotated, tmp_path, "--batch", "3", script=True)  # several transactions per tenant
    assert out.returncode == 0, out.stderr
    assert "acme: 8 blob(s) sealed under k2 (7 under k1, 1 in plain text), 0 already under it, 0 unreadable" \
        in out.stdout
    assert "globex: 1 blob(s) sealed under k2 (1 under k1)" in out.stdout
    assert "every blob of 2 tenant(s) is sealed under k2" in out.stdout
    assert set(key_ids(db).values()) == {"k2"}
    # The old key can go: the new key alone reads everything, text unchanged.
    with Store.open(url, blob_keys=new) as store:
        assert store.get_blob(before, tenant="acme") == "written in plain text"
        for tenant, items in texts.items():
            assert [store.get_blob(r, tenant=tenant) for r in refs[tenant]] == items
    # Running it again changes nothing.
    again = reseal(url, rotated, tmp_path)
    assert again.returncode == 0 and "acme: 0 blob(s) sealed under k2, 8 already under it" in again.stdout


def test_blobs_it_cannot_open_are_left_and_reported_and_bad_input_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    url = f"sqlite:///{db}"
    lost, old, new = KeyRing.generate("gone"), KeyRing.generate("k1"), KeyRing.generate("k2")
    with Store.open(url, blob_keys=lost) as store:
        orphan = store.put_blob("acme", "sealed under a key nobody kept", "log")
    with Store.open(url, blob_keys=old) as store:
        kept = store.put_blob("acme", "sealed under k1", "log")
    out = reseal(url, KeyRing(new.keys + old.keys), tmp_path, "--tenant", "acme")
    assert out.returncode == 1
    assert "acme: 1 blob(s) sealed under k2 (1 under k1), 0 already under it, 1 unreadable" in out.stdout
    assert f"unreadable, left as it is: {orphan}" in out.stderr and "'gone'" in out.stderr
    assert key_ids(db) == {("acme", orphan): "gone", ("acme", kept): "k2"}
    # No keys: nothing to seal with. A tenant no card could name. A batch out of range.
    none = reseal(url, None, tmp_path)
    assert none.returncode == 2 and "no blob keys: set CARDLOOP_CODEC_KEYS" in none.stderr
    bad = reseal(url, new, tmp_path, "--tenant", "Acme Corp")
    assert bad.returncode == 2 and "tenant 'Acme Corp'" in bad.stderr and "Traceback" not in bad.stderr
    batch = reseal(url, new, tmp_path, "--batch", "0")
    assert batch.returncode == 2 and "a batch is 1 to 10000 blobs" in batch.stderr
    with Store.open(url, blob_keys=None) as store, pytest.raises(StoreError, match="nothing to seal with"):
        store.reseal_blobs("acme")


@pytest.mark.postgres
def test_on_postgresql_the_application_role_reseals_the_tenants_it_names(postgres_admin: Engine,
                                                                          tmp_path: Path) -> None:
    old, new = KeyRing.generate("pg-1"), KeyRing.generate("pg-2")
    with deployment(postgres_admin, "reseal") as (schema, owner, app_role):
        Store.provision_postgres_role(schema_url(schema, owner), app_role)
        url = schema_url(schema, app_role)
        with Store.open(url, blob_keys=old) as store:
            refs = {t: store.put_blob(t, f"{t}'s build log", "log") for t in ("acme", "globex")}
        rotated = KeyRing(new.keys + old.keys)
        hidden = reseal(url, rotated, tmp_path)  # row-level security: no tenant is visible unscoped
        assert hidden.returncode == 0 and "name them with --tenant" in hidden.stderr
        out = reseal(url, rotated, tmp_path, "--tenant", "acme")
        assert out.returncode == 0, out.stderr
        assert "acme: 1 blob(s) sealed under pg-2 (1 under pg-1)" in out.stdout and "globex" not in out.stdout
        with postgres_admin.connect() as conn:
            kids = {t: sealed_key_id(bytes(d)) for t, d in
                    conn.exec_driver_sql(f"SELECT tenant, data FROM {schema}.blobs")}
        assert kids == {"acme": "pg-2", "globex": "pg-1"}
        with Store.open(url, blob_keys=new) as store:
            assert store.get_blob(refs["acme"], tenant="acme") == "acme's build log"
