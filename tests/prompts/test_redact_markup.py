"""Credentials in markup and escaped strings: XML elements and .NET appSettings, `\\uXXXX`
escapes in JSON, and a PostgreSQL password file's lines. Each is replaced whole; look-alikes
stay."""

from __future__ import annotations

import json

import pytest

from cardloop.prompts.redact import redact
from cardloop.prompts.unicode_escape import unicode_decoded

PASSWORD = "Zx9kQ2mLp4Vb7Ns1"
HF = "hf_" + "JwZeLHmxvkMMazuGfoyiZloTFrJKLQWYLR"


@pytest.mark.parametrize("text", [
    f"<password>{PASSWORD}</password>",
    f"<settings><servers><server><id>central</id><username>deploy</username><password>{PASSWORD}</password>"
    "</server></servers></settings>",
    f"<soap:Body><auth:ApiKey>{PASSWORD}</auth:ApiKey></soap:Body>",
    f'<appSettings>\n  <add key="StripeApiKey" value="{PASSWORD}" />\n</appSettings>',
    f'<add name="ClientSecret" value="{PASSWORD}"/>',
])
def test_xml_credentials_are_redacted(text: str) -> None:
    out = redact(text)
    assert PASSWORD not in out and PASSWORD[:8] not in out and "[REDACTED:" in out
    assert out.count("<") == text.count("<")  # the markup stays whole


@pytest.mark.parametrize("text", [
    f"<settings><servers><server>\n  <password>\n    {PASSWORD}\n  </password>\n</server></servers></settings>",
    f"<password> {PASSWORD} </password>",
    f"<password><![CDATA[{PASSWORD}]]></password>",
    f'<password encrypted="false">{PASSWORD}</password>',
    f"<add key='ApiKey' value='{PASSWORD}' />",
    f'<bean id="ds"><property name="password" value="{PASSWORD}"/></bean>',
    f'<property name="hibernate.connection.password">{PASSWORD}</property>',
    f'<entry key="db.password">{PASSWORD}</entry>',
    f'<param name="apiToken" value="{PASSWORD}"></param>',
    f"<dict>\n  <key>Password</key>\n  <string>{PASSWORD}</string>\n</dict>",
    json.dumps({"content": f'<add key="ApiKey" value="{PASSWORD}" />'}),
    json.dumps({"content": f"<server>\n  <password>{PASSWORD}</password>\n</server>"}),
], ids=["indented", "spaced", "cdata", "attributes", "single-quotes", "spring-property", "property-text",
        "properties-entry", "param", "plist", "add-in-json", "element-in-json"])
def test_xml_credentials_in_every_layout_are_redacted(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and PASSWORD[-8:] not in out and "[REDACTED:" in out
    assert out.count("<") == text.count("<")


@pytest.mark.parametrize("text", [
    f'<appSettings>\n  <add value="{PASSWORD}" key="ApiKey" />\n</appSettings>',
    f"<add value='{PASSWORD}' key='ConnectionPassword'/>",
    f'<property value="{PASSWORD}" name="password"/>',
    f'<add value="{PASSWORD}"\n     key="ClientSecret" />',
], ids=["add", "single-quotes", "spring-property", "key-on-next-line"])
def test_a_value_attribute_before_its_key_is_redacted_whole(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and PASSWORD[-8:] not in out
    assert 'value="[REDACTED:xml-credential]"' in out or "value='[REDACTED:xml-credential]'" in out


@pytest.mark.parametrize("text", [
    '<add value="Information" key="LogLevel"/>',
    '<add value="00:30:00" key="TokenLifetime"/>',
    '<add value="{{ client_secret }}" key="ClientSecret"/>',
])
def test_a_value_before_a_key_that_names_no_credential_stays(text: str) -> None:
    assert redact(text) == text


def test_a_provider_token_ends_at_the_next_tag() -> None:
    # gitleaks' formats end a token at a quote, whitespace or `;`; in XML the text ends at `<`.
    # An element whose name says nothing of a credential, so only the format itself can find it.
    assert redact(f"<value>{HF}</value>") == "<value>[REDACTED:huggingface-access-token]</value>"


@pytest.mark.parametrize("text", [
    "<token>${TOKEN}</token>",
    "<password>${env.DB_PASSWORD}</password>",
    "<secretName>db-credentials</secretName>",
    "<tokenizer>WhitespaceTokenizer</tokenizer>",
    '<add key="LogLevel" value="Information"/>',
    '<add key="ClientSecret" value="{{ client_secret }}"/>',
    "<code>password</code> is the field's name",
    '<property name="password" value="${db.password}"/>',
    '<entry key="password.encoder">BCryptPasswordEncoder</entry>',
    '<add key="TokenLifetime" value="00:30:00"/>',
    "<key>PasswordPolicy</key>\n<string>StrongPolicy</string>",
    '<input type="password" name="password" value="">',
    "<label>Password</label>",
    '<param name="token" value="<your-token>"/>',
])
def test_markup_that_holds_no_secret_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    '{"\\u0070assword": "' + PASSWORD + '"}',
    '{"password": "' + "".join(f"\\u{ord(c):04x}" for c in PASSWORD) + '"}',
    '{"db_password": "Zx9kQ\\u002emLp4\\u0026Vb7Ns1"}',
    'log line\n{"user": "svc", "\\u0061pi_key": "' + PASSWORD + '"}\nnext line',
])
def test_u_escaped_json_secrets_are_redacted_whole(text: str) -> None:
    out = redact(text)
    assert "[REDACTED:" in out
    # Nothing of the value is left, escaped or not, and the JSON still parses.
    for line in out.splitlines():
        if line.startswith("{"):
            decoded = json.loads(line)
            assert not any("Zx9k" in v or "Vb7N" in v for v in decoded.values())


def test_the_decoded_view_covers_only_the_lines_with_escapes() -> None:
    text = "a\n" * 1000 + 'x "\\u0070w": 1\n' + "b\n" * 1000
    views = unicode_decoded(text)
    assert [plain for plain, _ in views] == ['x "pw": 1']
    plain, where = views[0]
    assert text[where[0]:where[-1]] == 'x "\\u0070w": 1' and len(where) == len(plain) + 1


def test_an_astral_character_decodes_as_one_and_a_lone_surrogate_stays() -> None:
    (plain, _), = unicode_decoded("z\\ud83d\\ude00y\\ud800q")
    assert plain == "z\U0001F600y\\ud800q"


@pytest.mark.parametrize("text", [
    f"$ cat ~/.pgpass\ndb.internal:5432:app:appuser:{PASSWORD}\n",
    f"PGPASSFILE=/run/secrets/pgpass\n*:*:*:replicator:{PASSWORD}\n",
    f'echo "db:5432:app:svc:{PASSWORD}" > ~/.pgpass',
])
def test_pgpass_lines_lose_their_password(text: str) -> None:
    out = redact(text)
    assert PASSWORD not in out and "[REDACTED:pgpass-password]" in out


@pytest.mark.parametrize("text", [
    f"db.internal:5432:app:appuser:{PASSWORD}\n",  # no password file named: colon lines are everywhere
    "see ~/.pgpass\n12:30:45:123:foo:bar\n",       # a timestamp-like line is no pgpass line
    "~/.pgpass\ndb:5432:app:svc:${PGPASSWORD}\n",  # a reference
])
def test_colon_lines_without_a_pgpass_password_stay(text: str) -> None:
    assert redact(text) == text


def test_an_escaped_colon_is_part_of_the_password() -> None:
    out = redact("~/.pgpass\nh:5432:d:u:pa\\:ss\\:w0rd9\n")
    assert out == "~/.pgpass\nh:5432:d:u:[REDACTED:pgpass-password]\n"


@pytest.mark.parametrize("line", [
    f"\\:\\:1:5432:app:svc:{PASSWORD}",       # an IPv6 host, its colons escaped as the format asks
    f"db.internal:5432:billing\\:v2:svc:{PASSWORD}",
    f"db.internal:*:*:CORP\\\\svc:{PASSWORD}",
], ids=["ipv6-host", "escaped-colon-in-database", "escaped-backslash-in-user"])
def test_escaped_characters_in_the_other_pgpass_fields_do_not_hide_the_password(line: str) -> None:
    out = redact(f"# ~/.pgpass\n{line}\n")
    assert PASSWORD not in out and out.endswith(":[REDACTED:pgpass-password]\n")
