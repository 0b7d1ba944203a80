"""The card's query: change verbs ("Fix", "Update") count a quarter, links without their scheme and
host, so neither pulls in files the card is not about (docs/updates.rst, .github/)."""

from __future__ import annotations

from cardloop.integrations.sources.ranking import BM25Index
from cardloop.integrations.sources.repository import card_query
from cardloop.integrations.sources.repository.mentions import CHANGE_VERB_WEIGHT
from cardloop.prompts.card import Card


def test_change_verbs_count_less() -> None:
    query = card_query(Card(id="Q-1", title="Fix the retry backoff", body="Update the docs too."))
    assert query["retry"] == query["backoff"] == 2.0  # the title counts double
    assert query["fix"] == 2.0 * CHANGE_VERB_WEIGHT
    assert query["updat"] == 1.0 * CHANGE_VERB_WEIGHT and query["doc"] == 1.0


def test_a_link_counts_without_its_scheme_and_host() -> None:
    query = card_query(Card(id="Q-2", title="Retry storms", body="See https://github.com/acme/hooks/pull/42 and "
                                                                 "http://www.example.com/retry?x=1."))
    assert not {"http", "https", "github", "www", "exampl", "com"} & query.keys()
    assert {"acme", "hook", "pull", "42", "retry"} <= query.keys()


def test_a_change_verb_does_not_outrank_what_the_card_is_about() -> None:
    docs = [
        ("docs/community/updates.rst", "Updates\n=======\n\nUpdate notes: how to update, when we update.\n"
                                       "The retry page moved.\n"),
        ("app/webhooks/retry.py", "def compute_backoff(attempt):\n    # the retry backoff doubles\n"
                                  "    return 2 ** attempt\n"),
    ]
    card = Card(id="Q-3", title="Update the retry backoff cap")
    assert BM25Index(docs).rank(card_query(card), 1)[0][0] == "app/webhooks/retry.py"
