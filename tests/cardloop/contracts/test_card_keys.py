"""The one rule from a board's card id to the card key: real ids keep the keys they always had,
two ids never share a key, and an id that cannot be kept as it is is refused by name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardloop.contracts.payloads import CardRef, card_key_id
from cardloop.prompts.card import Card
from cardloop.store import StoreError, card_key_for


@pytest.mark.parametrize(("board_id", "key_id"), [
    ("Octocoders/payments#142", "Octocoders:payments#142"),    # GitHub issue or PR: as before
    ("acme/api.js#7", "acme:api.js#7"),
    ("PVTI_lADOAWcTxs07G84AVqWu", "PVTI_lADOAWcTxs07G84AVqWu"),  # a GitHub project item without content
    ("ENG-12", "ENG-12"),                                      # Linear
    ("PAY-142", "PAY-142"),                                    # Jira
    ("aB3dE5fG", "aB3dE5fG"),                                  # Trello short link
    ("67c0a1b2c3d4e5f6a7b8c9d0", "67c0a1b2c3d4e5f6a7b8c9d0"),  # Trello card id
    ("a/b/c", "a:b:c"),
    ("a:b:c", "a%3Ab%3Ac"),                                    # a literal ':' no longer merges with '/'
])
def test_real_ids_keep_their_keys_and_a_literal_colon_is_escaped(board_id: str, key_id: str) -> None:
    assert card_key_id(board_id) == key_id
    ref = CardRef.for_board("acme", "github", board_id)
    assert ref.key == f"acme/github/{key_id}" and ref.workflow_id == f"card/acme/github/{key_id}"
    assert CardRef.parse(ref.key) == ref   # the CLI reads the key back to the same card


@pytest.mark.parametrize("board_id", [
    "////", "...", "-x", ":a", "", "a b", "a\u202eb", "a\u200bb", "a\u2066b\u2069", "a\nb", "Café-1", "a%3Ab",
    "x" * 201, "a" + ":" * 70,
])
def test_ids_that_cannot_be_kept_as_they_are_are_refused_by_name(board_id: str) -> None:
    with pytest.raises(ValueError, match="card id") as info:
        card_key_id(board_id)
    if board_id and len(board_id) < 60:
        assert ascii(board_id) in str(info.value) or repr(board_id) in str(info.value)


@pytest.mark.parametrize("key_id", ["a:b%3a", "%3Aa", "a%20b", "a%", "a/b", ".a", "a\n"])
def test_a_ref_takes_only_the_canonical_key_form(key_id: str) -> None:
    with pytest.raises(ValueError):
        CardRef(card_id=key_id)


_ID_CHARS = st.sampled_from("aZ09._:#/-")


@given(st.lists(st.tuples(st.sampled_from("aZ0"), st.text(_ID_CHARS, max_size=12)).map("".join),
                min_size=2, max_size=2, unique=True))
def test_two_distinct_ids_never_share_a_key(ids: list[str]) -> None:
    assert card_key_id(ids[0]) != card_key_id(ids[1])


def test_the_store_keys_a_card_file_by_the_same_rule() -> None:
    card = Card(id="acme/api#12", tenant="acme", board="github", title="t")
    assert card_key_for(card) == "acme/github/acme:api#12"
    literal = Card(id="acme:api#12", tenant="acme", board="github", title="t")
    assert card_key_for(literal) == "acme/github/acme%3Aapi#12"
    with pytest.raises(StoreError, match="card id"):
        card_key_for(Card.model_construct(id="////", tenant="acme", board="github", title="t"))
