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


@pytest.mark.parametrize(("fragment", "where"), [
    ('"title": "hi \\ud800"', "title"),
    ('"title": "t", "history": [{"role": "user", "content": "x \\udc00", "author": "dana"}]', "history.0.content"),
    ('"title": "t", "history": [{"role": "user", "content": "x", "author": "\\ud800"}]', "history.0.author"),
    ('"title": "t", "history": [{"role": "assistant", "tool_calls": [{"id": "c1", "name": "run", '
     '"input": {"\\ud800": 1}}]}]', "history.0.tool_calls.0.input.\\ud800 (a key)"),
    ('"title": "t", "context": [{"kind": "notes", "source": "s", "content": "c", "title": "\\udfff"}]',
     "context.0.title"),
    ('"title": "t", "tenant_prompt": {"tone_profile": {"\\udc00": "x"}}', "tenant_prompt.tone_profile.\\udc00 (a key)"),
])
def test_a_lone_surrogate_anywhere_in_a_card_file_is_refused_naming_the_field(fragment: str, where: str) -> None:
    with pytest.raises(CardError) as info:
        parse_card('{"id": "PAY-1", ' + fragment + "}", origin="card.json")
    message = str(info.value)
    assert f"{where}: lone surrogate U+D" in message
    message.encode("utf-8")  # printable: the error itself never carries the raw character


def test_a_surrogate_pair_escape_in_a_card_file_is_text() -> None:
    card = parse_card('{"id": "PAY-1", "title": "ship \\ud83d\\ude80"}')
    assert card.title == "ship \U0001f680"


def test_the_readme_card_files_table_names_every_field_and_context_kind() -> None:
    # README "Card files" is what a user writes a card from: a field or context kind the model
    # takes and the table leaves out (`schema_version`, `research`) is one they cannot know of.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Card files", 1)[1].split("\n## ", 1)[0]
    schema = card_json_schema()
    missing = [f for f in schema["properties"] if f"`{f}`" not in table]
    missing += [k for k in schema["$defs"]["ContextKind"]["enum"] if f"`{k}`" not in table]
    assert missing == [], missing
