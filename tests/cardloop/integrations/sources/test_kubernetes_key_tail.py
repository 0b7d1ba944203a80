"""A pod log whose tail starts inside a private key the service printed (a settings dump at
start-up): `tailLines` cuts above the key's BEGIN line, so the private-key rule, which starts
there, saw nothing, and every line of the key's body went into the stored context item, the
whole-log blob and the prompt. Real `kubernetes` client against the loopback API
(fake_kubernetes.py), real SQLite store, as context.gather stores them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cardloop.prompts.card import Card
from cardloop.store import Store
from tests.cardloop.integrations.sources.fake_kubernetes import (
    CRASHING,
    NOW,
    FakeCluster,
    add_crashloop,
    crash_log,
    gather,
)

# A fake RSA key body of the real shape (64-character base64 lines).
KEY_LINES = ["MIIEowIBAAKCAQEAwq3vB8nR2mK7pL4wT9yH1cF6dJ0sA5gEXq3vB8nR2mK7pL4wT9",
             "yH1cF6dJ0sA5gEZr8Tu3Wq2Lk7VbQm7X8cP0aZ3yN6uF4jB2vR9sLw1tE5oK8dH3",
             "gJ7fA0qW2xC4bV6nM9zS1pL3kT5oYr2Wq8Es6Df4Gh0Jk2Lz4Xc6Vb8Nm0Qa1Ws",
             "3Ed5Rf7Tg9Yh1Uj3Ik5Ol7Pz9AxQm7X8cP0aZ3yN6uF4jB2vR9sLw1tE5oK8dH3gJ=="]


def test_a_log_tail_that_starts_inside_a_private_key_stores_none_of_it(
        cluster: FakeCluster, make_source: Any, tmp_path: Path) -> None:
    add_crashloop(cluster)
    dump = ("2025-05-12 10:00:00,001 DEBUG payments.settings: signing_key=\n-----BEGIN RSA PRIVATE KEY-----\n"
            + "\n".join(KEY_LINES) + "\n-----END RSA PRIVATE KEY-----\n")
    log = dump + crash_log(NOW)
    cluster.logs[("payments", CRASHING, "api", True)] = log
    tail = len(log.splitlines()) - 3  # the tail starts at the key's third line: BEGIN is cut off
    result = gather(make_source(tail_lines=tail))
    kept = result.blobs[f"kubernetes/payments/{CRASHING}/api.previous.log"]
    assert KEY_LINES[2] in kept and "BEGIN" not in kept  # the cut this test is about

    db = tmp_path / "store.sqlite"
    store = Store.open(f"sqlite:///{db}")
    try:
        key = "acme/github/PAY-9"
        store.upsert_card(key, Card(id="PAY-9", tenant="acme", board="github", title="API crashloops"))
        store.put_context_items(key, result.items)
        ref = store.put_blob("acme", kept, "context:kubernetes/api.previous.log")
        texts = [i.content for i in store.context_items(key)] + [store.get_blob(ref, tenant="acme")]
        assert any("[REDACTED:private-key]" in t for t in texts)
        assert any("1 validation error for WebhookSettings" in t for t in texts)  # the rest stays
    finally:
        store.close()
    data = b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))
    for line in KEY_LINES[1:]:
        assert line[:24].encode() not in data
