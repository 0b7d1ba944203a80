from __future__ import annotations

import json

import pytest

from cardloop.prompts.card import CardError, card_json_schema, parse_card
from tests.conftest import ROOT

SCHEMA_FILE = ROOT / "examples" / "card.schema.json"


def test_committed_schema_matches_the_model() -> None:
    """Regenerate with: cardloop card schema > examples/card.schema.json"""
    assert json.loads(SCHEMA_FILE.read_text()) == card_json_schema()


def test_minimal_card_parses() -> None:
    card = parse_card('{"id": "PAY-1", "title": "Do it"}')
    assert card.tenant == "default" and card.history == ()


@pytest.mark.parametrize(("body", "needle"), [
    ('{"id": "PAY-1"}', "title: Field required"),
    ('{"id": "PAY 1!", "title": "t"}', "id: String should match pattern"),
    ('{"id": "P", "title": "t", "repo": "not a repo"}', "repo:"),
    ('{"id": "P", "title": "t", "surprise": 1}', "surprise: Extra inputs are not permitted"),
    ('{"id": "P", "title": "t", "history": [{"role": "tool", "content": "x"}]}', "needs tool_call_id"),
    ('{"id": "P", "title": "t", "history": [{"role": "tool", "content": "x", "tool_call_id": "c9"}]}',
     "no earlier assistant tool call"),
    ('{"id": "P", "title": "t", "context": [{"kind": "tweet", "source": "x", "content": "y"}]}',
     "context.0.kind"),
    ('[1, 2]', "must be a JSON object"),
    ('{"id": ', "not valid JSON"),
])
def test_bad_cards_name_the_field(body: str, needle: str) -> None:
    with pytest.raises(CardError) as info:
        parse_card(body, origin="card.json")
    assert needle in str(info.value)
    assert str(info.value).startswith("card.json:")
