"""Secrets at rest: what is only ever needed redacted (context items, whole logs, prompts) is
redacted before it is stored, so the database file itself holds no trace of it. Checked on a
real SQLite file by reading its bytes (and its WAL and journal, wherever SQLite put them)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cardloop.prompts.card import Card, ContextItem, ContextKind
from cardloop.store import Store, blob_ref

KEY = "acme/github/PAY-7"
# A fake AWS pair of the real shape, pasted without a label, as in issue 11.
KEY_ID = "AK" + "IA" + "Q3EGRXTZ7VN2KL4P"
SECRET = "kP9vT2xQ7mZ4bN8cR1yW6sD3fG5hJ0aL" + "uE7iO2tY"
TOKEN = "gh" + "p_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _file_bytes(path: Path) -> bytes:
    """The database file and every file SQLite keeps beside it (-wal, -shm, -journal)."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def _card(body: str = "Deploys fail since Monday.") -> Card:
    return Card(id="PAY-7", tenant="acme", board="github", title="Deploy fails", body=body)


def test_a_card_whose_context_carries_an_aws_pair_leaves_no_trace_in_the_file(tmp_path: Path) -> None:
    db = tmp_path / "cardloop.sqlite"
    store = Store.open(f"sqlite:///{db}")
    try:
        store.upsert_card(KEY, _card())
        log = (f"##[group]Run deploy\naws configure set creds {KEY_ID} {SECRET}\n"
               f"fatal: https://x-access-token:{TOKEN}@github.com/acme/pay.git denied\n")
        store.put_context_items(KEY, [
            ContextItem(kind=ContextKind.BUILD_LOG, source=f"https://ci.example.com/run/1?token={TOKEN}",
                        title=f"deploy with {KEY_ID} {SECRET}", content=log,
                        created_at=datetime(2026, 1, 2, tzinfo=UTC)),
        ])
        # The whole log kept for research, and a prompt that quoted it: blobs, both redacted.
        log_ref = store.put_blob("acme", log, "context:github_actions/run-1")
        prompt_ref = store.put_blob("acme", f"<untrusted kind=build_log>{log}</untrusted>", "prompt")

        # What reads it back gets the redacted text, under the ref of the redacted text.
        [item] = store.context_items(KEY)
        for text in (item.content, item.title or "", item.source, store.get_blob(log_ref, tenant="acme"),
                     store.get_blob(prompt_ref, tenant="acme")):
            assert KEY_ID not in text and SECRET not in text and TOKEN not in text
        assert "[REDACTED:" in item.content and "##[group]Run deploy" in item.content
        assert log_ref == blob_ref(store.get_blob(log_ref, tenant="acme"))
    finally:
        store.close()

    data = _file_bytes(db)
    assert b"Run deploy" in data  # the log is in the file ...
    for secret in (KEY_ID, SECRET, TOKEN, SECRET[:20], TOKEN[4:24]):
        assert secret.encode() not in data  # ... its secrets are not, not even in part


def test_context_is_replaced_by_its_redacted_source(tmp_path: Path) -> None:
    # Items are replaced per source; a source that held a secret is matched in its stored form.
    store = Store.open(f"sqlite:///{tmp_path / 'c.sqlite'}")
    try:
        store.upsert_card(KEY, _card())
        source = f"https://ci.example.com/run/1?token={TOKEN}"
        for content in ("first log", "second log"):
            store.put_context_items(KEY, [ContextItem(kind=ContextKind.BUILD_LOG, source=source, content=content)])
        assert [i.content for i in store.context_items(KEY)] == ["second log"]
    finally:
        store.close()


def test_the_raw_card_is_kept_as_the_board_sent_it(tmp_path: Path) -> None:
    # Deliberate (README, "Secrets at rest"): the card is the board's record, read back whole;
    # every way out of the store (prompt, log, UI, card show) redacts it, and the file is
    # private to the service's user (cardloop/app/private.py, tested with the app).
    db = tmp_path / "cardloop.sqlite"
    store = Store.open(f"sqlite:///{db}")
    try:
        store.upsert_card(KEY, _card(body=f"creds: {KEY_ID} {SECRET}"))
        assert SECRET in store.get_card(KEY).body  # type: ignore[union-attr]
    finally:
        store.close()
    assert SECRET.encode() in _file_bytes(db)
