"""Text with NUL characters, which PostgreSQL text refuses: the store keeps it with U+FFFD in
their place, on SQLite and PostgreSQL alike (store/engine.py). Senders put NUL in a board
comment's actor, a token's name, a token id in a URL: on PostgreSQL each was an unhandled
database error (an HTTP 500), on SQLite kept as sent."""

from __future__ import annotations

from cardloop.prompts.card import Message
from cardloop.store import Store
from cardloop.store.engine import without_nul
from tests.cardloop.store.store_kit import card

KEY = "acme/generic/NUL-1"


def test_text_with_nul_is_stored_with_a_replacement_character_on_both_backends(store: Store) -> None:
    store.upsert_card(KEY, card(KEY))
    assert store.record_effect(KEY, "board_actor/1", "board_actor", "ana\x00 bot")
    found = store.effect(KEY, "board_actor/1")
    assert found is not None and found.result == "ana\ufffd bot"
    issued = store.create_api_token("acme", "ci\x00")
    assert [t.name for t in store.api_tokens("acme")] == ["ci\ufffd"]
    assert store.tenant_for_token(issued.token) == "acme"  # the token itself is untouched
    seq = store.append_message(KEY, Message(role="user", author="ana\x00", content="see\x00this"))
    assert seq == 0 and store.messages(KEY)[0].content == "see\x00this"  # pydantic JSON: NUL escaped, kept


def test_a_lookup_by_a_key_with_nul_finds_nothing_instead_of_failing(store: Store) -> None:
    store.create_api_token("acme", "ci")
    assert store.revoke_api_token("acme", "tok_\x00") is False
    assert store.delivery_seen("acme", "generic", "d\x00") is False
    assert store.effect(KEY, "k\x00") is None


def test_without_nul_replaces_in_every_shape_the_driver_gets_and_keeps_the_rest() -> None:
    params = {"a": "x\x00y", "b": 1, "c": b"\x00", "d": None}
    assert without_nul(params) == {"a": "x\ufffdy", "b": 1, "c": b"\x00", "d": None}
    assert without_nul(["\x00", ("a\x00",)]) == ["\ufffd", ("a\ufffd",)]
    assert without_nul([{"k": "\x00"}, {"k": "ok"}]) == [{"k": "\ufffd"}, {"k": "ok"}]
    clean = {"a": "x", "b": 2}
    assert without_nul(clean) == clean
