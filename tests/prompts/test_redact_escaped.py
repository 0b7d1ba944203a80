"""Secrets inside escaped text (JSON, a JSON log line, a Python repr): the rules read `\\n`,
`\\t` and `\\"` as the characters they stand for, so a secret right after an escaped newline is
found, and a marker never takes the backslash of the escape after it (the JSON stays JSON)."""

from __future__ import annotations

import json

import pytest

from cardloop.prompts.redact import redact
from tests.prompts.fake_secrets import ANTHROPIC, AWS_KEY_ID, JWT, STRIPE_LIVE

QUERY_TOKEN = "Zk8mQ2xL9vR4" + "tN7bW1cY"


@pytest.mark.parametrize("secret", [AWS_KEY_ID, STRIPE_LIVE, ANTHROPIC], ids=["aws", "stripe", "anthropic"])
@pytest.mark.parametrize("before", ["config:\n", "key\t", "x\r\n"], ids=["newline", "tab", "crlf"])
def test_a_token_after_an_escaped_newline_or_tab_in_json_is_redacted(secret: str, before: str) -> None:
    line = json.dumps({"level": "info", "msg": before + secret + "\nnext"})

    out = redact(line)

    assert secret[4:20] not in out
    assert json.loads(out)["msg"].startswith(before + "[REDACTED:")


@pytest.mark.parametrize("text", [
    f"https://x.example/c?token={QUERY_TOKEN}",
    f"see https://x.example/c?api_key={QUERY_TOKEN}&a=1",
    f"jdbc:postgresql://db/app?user=app&password={QUERY_TOKEN}",
    f"the password was {QUERY_TOKEN}",
    f"auth: {JWT}",
    "https://x.example/c?token=[REDACTED:url-query-secret]",  # a prompt's marker, redacted again
], ids=["query", "query-amp", "jdbc", "password-was", "jwt", "marker"])
@pytest.mark.parametrize("wrap", ['"{}"', '<a href="{}">', "{}\t", "{}\n"], ids=["quoted", "attr", "tab", "newline"])
def test_redacting_json_leaves_json_whose_values_lost_only_the_secret(text: str, wrap: str) -> None:
    value = wrap.replace("{}", text)
    for doc in (json.dumps({"m": value}), json.dumps({"outer": json.dumps({"m": value})})):
        out = redact(doc)
        parsed = json.loads(out)  # a marker that took an escape's backslash broke this
        inner = parsed["m"] if "m" in parsed else json.loads(parsed["outer"])["m"]
        assert QUERY_TOKEN not in out and JWT[-20:] not in out
        assert inner.endswith(wrap[wrap.index("{}") + 2:])  # the quote, tab or newline is kept


def test_offsets_are_those_of_the_original_text() -> None:
    text = json.dumps({"a": "x\n\t" + STRIPE_LIVE, "b": "\\\\" + AWS_KEY_ID + "\"q"})
    out = redact(text)
    assert json.loads(out) == {"a": "x\n\t[REDACTED:stripe-api-key]", "b": "\\\\[REDACTED:aws-access-key-id]\"q"}


PASSWORD = "Zx9kQ2mLp4" + "Vb7Ns1"
AWS_SECRET = "kP9vT2xQ7mZ4bN8cR1yW6sD3fG5hJ0aL" + "uE7iO2tY"


@pytest.mark.parametrize("depth", [2, 3, 4], ids=["json-in-json", "three-deep", "four-deep"])
@pytest.mark.parametrize(("key", "value"), [
    ("password", PASSWORD), ("db_password", PASSWORD), ("api_key", PASSWORD), ("client_secret", PASSWORD),
    ("aws_secret_access_key", AWS_SECRET), ("Authorization", "Bearer " + PASSWORD + PASSWORD),
], ids=["password", "db_password", "api_key", "client_secret", "aws", "authorization"])
def test_a_credential_key_and_its_value_in_json_inside_json_are_redacted(key: str, value: str, depth: int) -> None:
    # A tool result quoting a .json file, inside a prompt or a log line that is JSON itself: the
    # quotes around key and value are escaped (`{\"password\": \"...\"}`), and read as quotes
    # their backslashes stand where a space would be, before the quote.
    doc = json.dumps({"user": "svc", key: value, "port": 5432})
    for _ in range(depth - 1):
        doc = json.dumps({"outer": doc})
    out = redact(doc)
    inner = out
    for _ in range(depth - 1):
        inner = json.loads(inner)["outer"]  # still JSON at every depth: no backslash was taken
    assert PASSWORD not in out and AWS_SECRET[:20] not in out and PASSWORD[:8] not in out
    assert json.loads(inner)[key].startswith(value.split()[0] if " " in value else "[REDACTED:")


LOCALE = {"login": {"title": "Melden Sie sich an", "password": "Passwort", "forgot": "Passwort vergessen?",
                    "submit": "Jetzt anmelden"}}


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_translation_table_in_json_inside_json_keeps_its_credential_words(depth: int) -> None:
    """A locale file quoted in a JSON string (a tool result, a stored prompt): its `\\"password\\":
    \\"Passwort\\"` is a label among UI phrases, as it is unescaped."""
    doc = json.dumps(LOCALE)
    for _ in range(depth):
        doc = json.dumps({"content": doc})
    assert redact(doc) == doc


@pytest.mark.parametrize("value", ["Xk9pQ7vR2mT4wq", "Sunshine"])
@pytest.mark.parametrize("depth", [1, 2])
def test_a_password_in_json_inside_json_still_goes_beside_phrases_or_config(value: str, depth: int) -> None:
    """A random value goes even among UI phrases; a dictionary word goes in a config's map."""
    docs = [{"password": value, "title": "Melden Sie sich an", "forgot": "Passwort vergessen?"},
            {"password": value, "host": "db.internal", "user": "admin"}]
    for inner in docs:
        if value == "Sunshine" and "title" in inner:
            continue  # a natural word among phrases is a translation: the trade-off of locale_table.py
        doc = json.dumps(inner)
        for _ in range(depth):
            doc = json.dumps({"content": doc})
        out = redact(doc)
        assert value not in out
        assert json.loads(out)  # still JSON
