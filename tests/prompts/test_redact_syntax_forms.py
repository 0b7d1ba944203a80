"""Credentials in a config syntax's own forms around a value: a default inside a placeholder,
YAML anchors and tags, TOML multi-line strings, Java .properties separated by a space, an HTML
password input. Each secret is replaced whole; names, placeholders and ordinary text stay."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import redact

SECRET = "s3cr3tV4lue" + "Q8w7Rt"


def _gone(out: str) -> bool:
    return SECRET[:8] not in out and SECRET[-8:] not in out


@pytest.mark.parametrize(("text", "kept"), [
    (f"password: ${{DB_PASSWORD:{SECRET}}}\n", "password: ${DB_PASSWORD:"),
    (f"password: ${{DB_PASSWORD:-{SECRET}}}\n", "password: ${DB_PASSWORD:-"),
    (f"API_TOKEN=${{API_TOKEN-{SECRET}}}\n", "API_TOKEN=${API_TOKEN-"),
    (f"      - POSTGRES_PASSWORD=${{POSTGRES_PASSWORD:={SECRET}}}\n", "POSTGRES_PASSWORD:="),
    # The key it is assigned to names the credential, the variable does not.
    (f"spring.datasource.password=${{DB_PASS:{SECRET}}}\n", "spring.datasource.password=${DB_PASS:"),
    (f"app.api-key: ${{app.api-key:{SECRET}}}\n", "${app.api-key:"),
    (f'"password": "${{PW:-{SECRET}}}"', '"password": "${PW:-'),
    (f"url: ${{A:-${{DB_PASSWORD:-{SECRET}}}}}\n", "${A:-${DB_PASSWORD:-"),
    # The shell's alternate value, used when the variable is set: a literal as a default is.
    (f"DB_URL=${{DB_PASSWORD:+{SECRET}}}\n", "DB_URL=${DB_PASSWORD:+"),
    (f"export PGPASSWORD=${{DB_PASSWORD+{SECRET}}}\n", "${DB_PASSWORD+"),
], ids=["spring", "compose", "no-colon", "assign-default", "outer-key", "spring-kebab", "json", "nested",
        "alternate", "alternate-no-colon"])
def test_a_default_inside_a_placeholder_is_redacted(text: str, kept: str) -> None:
    out = redact(text)
    assert _gone(out) and kept in out and "[REDACTED:placeholder-default]" in out


@pytest.mark.parametrize("text", [
    "password: ${DB_PASSWORD}\n",
    "password: ${DB_PASSWORD:?set DB_PASSWORD}\n",
    "port: ${PORT:8080}\nlog: ${LOG_LEVEL:-info}\n",
    "url: ${DB_URL:jdbc:postgresql://localhost:5432/app}\n",
    "secret_name: ${SECRET_NAME:-db-credentials}\nttl: ${TOKEN_TTL:-3600}\n",
    "key_file: ${TLS_KEY_FILE:-/etc/tls/key.pem}\n",
    "const s = `${a-b} and ${count:-0}`;\n",
    "echo ${PASSWORD_FILE:-/run/secrets/db_password}\n",
    # The message of `:?` (the shell stops with it when the variable is unset), an alternate built
    # from the variable itself or a flag saying it is set.
    "password: ${DB_PASSWORD:?DB_PASSWORD_must_be_set}\nx: ${db.password:?required_here}\n",
    'mysql -u app ${DB_PASSWORD:+-p"$DB_PASSWORD"} app\n',
    "gh auth login ${GH_TOKEN:+--with-token}\n",
])
def test_placeholders_without_a_credential_default_stay(text: str) -> None:
    assert redact(text) == text


def test_a_long_capital_token_with_digits_inside_is_no_name() -> None:
    # A New Relic key with few digits passed for an UPPER_SNAKE name once quoted.
    token = "NR" + "AK-BLSVWUHMCFURT575FNO4YAGSIKP"
    out = redact(f'<add value="{token}" key="NEW_RELIC_API_KEY" />')
    assert token[5:] not in out and "[REDACTED:" in out


@pytest.mark.parametrize(("text", "kept"), [
    (f"db:\n  password: &pw {SECRET}\n  replica_password: *pw\n", "password: &pw "),
    (f"password: !!str {SECRET}\n", "password: !!str "),
    (f'password: !!str "{SECRET}"\n', 'password: !!str "'),
    (f"password: &pw !!str {SECRET}\n", "&pw !!str "),
    (f"db:\n  password: &pw\n    {SECRET}\n", "password: &pw\n"),
    (f"tls:\n  private_key: !!binary |\n    {SECRET}{SECRET}\n    {SECRET}\n  port: 8443\n", "  port: 8443"),
], ids=["anchor", "tag", "tag-quoted", "anchor-and-tag", "anchor-then-line", "tagged-block"])
def test_a_yaml_anchor_or_tag_before_a_credential_hides_nothing(text: str, kept: str) -> None:
    out = redact(text)
    assert _gone(out) and kept in out


def test_an_ansible_vault_block_under_a_credential_key_goes_whole() -> None:
    block = "\n".join("          " + line for line in ("$ANSIBLE_VAULT;1.1;AES256", "6231343563363338" * 4,
                                                        "3435366565323566" * 4))
    out = redact(f"db_user: app\ndb_password: !vault |\n{block}\ndb_port: 5432\n")
    assert out == "db_user: app\ndb_password: !vault |\n          [REDACTED:yaml-block-credential]\ndb_port: 5432\n"


@pytest.mark.parametrize("text", [
    "db:\n  password: &pw\n  replica_password: *default_password\n",
    "DbPassword: !Ref DbPasswordParameter\nToken: !Sub \"${ApiToken}\"\nApiKey: !GetAtt Secret.Arn\n",
    "api_key: !secret openai_api_key\npassword: !ENV ${DB_PASSWORD}\n",
    "defaults: &defaults\n  token_header: X-Request-Token\n",
])
def test_yaml_aliases_references_and_tags_on_names_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("text", "kept"), [
    (f'[database]\npassword = """{SECRET}"""\nport = 5432\n', 'password = """'),
    (f"[database]\npassword = '''{SECRET}'''\nport = 5432\n", "password = '''"),
    (f'api_key = """\n{SECRET}\n"""\nport = 5432\n', '"""\nport = 5432'),
    (f"password = '''\n{SECRET}{SECRET}'''\n", "password = '''\n"),
    (f'password = """\ncorrect horse {SECRET} staple\n"""\n', 'password = """\n'),
    # Longer than any bound a scan could set (a service account's JSON key runs to kilobytes).
    (f'credentials = """\n{SECRET}{"x" * 9000}{SECRET}\n"""\nport = 5432\n', '"""\nport = 5432'),
], ids=["basic", "literal", "next-line", "literal-next-line", "words", "long"])
def test_a_toml_multi_line_string_under_a_credential_key_is_redacted(text: str, kept: str) -> None:
    out = redact(text)
    assert _gone(out) and kept in out and "[REDACTED:generic-assignment]" in out


@pytest.mark.parametrize("text", [
    'description = """The password reset link expires in 12 hours."""\n',
    'PASSWORD_HELP = """\nUse 12 characters or more, digits too.\n"""\n',
    'token = """\n{{ vault_token }}\n"""\npassword = """"""\n',
    'def f():\n    """Return the token."""\n    token = get_token()\n',
])
def test_multi_line_strings_that_hold_no_credential_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("text", "kept"), [
    (f"db.url=jdbc:postgresql://db/app\ndb.password {SECRET}\ndb.pool 10\n", "db.password "),
    (f"  spring.datasource.password\t{SECRET}\n", "spring.datasource.password\t"),
    (f"db.password   s3;cr{SECRET}\n", "db.password   "),
    (f"db.password: {SECRET}\n", "db.password: "),
    (f"javax.net.ssl.keyStorePassword {SECRET}", "keyStorePassword "),
], ids=["space", "tab", "any-character", "colon", "last-line"])
def test_a_properties_line_separated_by_a_space_loses_its_value(text: str, kept: str) -> None:
    out = redact(text)
    assert _gone(out) and kept in out and "[REDACTED:generic-assignment]" in out


@pytest.mark.parametrize("text", [
    "password reset link sent to the user\n",
    "Password expired\ntoken refreshed successfully today\n",
    f"see db.password {SECRET}\n",  # not a properties line: a word before the key
    f"api.token {SECRET} was rotated\n",  # more words after the value
    "db.password changeit\ndb.password ${DB_PASSWORD}\n",
    "if token is None:\n    return token_from_environment\n",
])
def test_prose_and_names_after_a_credential_word_stay(text: str) -> None:
    assert redact(text) == text


def test_a_provider_token_ends_at_the_brace_of_its_placeholder() -> None:
    # The variable names an id, not a credential: only gitleaks' format knows the token.
    token = "LT" + "AIuJgalgAIuZDhYTfAscEi"
    out = redact(f"ALIBABA_ACCESS_KEY_ID: ${{ALIBABA_ACCESS_KEY_ID:-{token}}}\n")
    assert token[4:] not in out and out.endswith("}\n")


@pytest.mark.parametrize(("text", "kept"), [
    (f'<input type="password" name="password" value="{SECRET}">', '<input type="password" name="password" value="'),
    (f'<input value="{SECRET}" type="password" />', '" type="password" />'),
    (f"<form>\n  <input\n    class='pw'\n    type=password\n    value='{SECRET}'\n  >\n</form>", "    value='"),
    (f'<input type="password" value="correct horse {SECRET}">', '<input type="password" value="'),
    (f'<input type="password" value={SECRET}>', "value=[REDACTED:html-password-input]>"),
    # HTML's names are case-insensitive: an old page or a generator writes them in capitals.
    (f'<INPUT TYPE="PASSWORD" NAME="pw" VALUE="{SECRET}">', '<INPUT TYPE="PASSWORD" NAME="pw" VALUE="'),
    (f"<Input Value='{SECRET}' Type='Password'>", "<Input Value='"),
], ids=["type-first", "value-first", "multi-line", "spaces", "unquoted", "upper-case", "mixed-case"])
def test_an_html_password_input_loses_its_value(text: str, kept: str) -> None:
    out = redact(text)
    assert _gone(out) and kept in out and "[REDACTED:html-password-input]" in out


@pytest.mark.parametrize("text", [
    '<input type="password" name="password" placeholder="Password" autocomplete="current-password">',
    '<input type="password" value="">\n<input type="password" value="{{ form.password.value }}">',
    f'<input type="text" name="commit" value="{"a3f1" * 10}">',
    '<input type="password" data-value="abcdxyz1" value="********">',
    '<input type="password-confirm" value="not-a-type-we-know">',
    f'<INPUT TYPE="TEXT" NAME="commit" VALUE="{"a3f1" * 10}">\n<INPUTS type="password" value="abcdxyz1">',
])
def test_html_inputs_that_hold_no_password_stay(text: str) -> None:
    assert redact(text) == text
