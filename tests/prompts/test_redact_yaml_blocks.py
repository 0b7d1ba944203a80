"""A credential whose value runs over several lines: YAML block scalars (`password: |`,
`private_key: >-`, `token: |-`) and a plain value indented below its key lose every line; a
shell line continuation inside an assignment (`export API_TOKEN=abc\\` then `def`) loses both
halves. Block text under other keys, templates and nested mappings stay."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import redact

PASSWORD = "Zx9kQ2mLp4" + "Vb7Ns1"
OTHER = "Qm3Rt8Wv" + "Xy2Kp5Ln"


@pytest.mark.parametrize("text", [
    f"db:\n  password: |\n    {PASSWORD}\n  port: 5432\n",
    f"tls:\n  private_key: >-\n    {PASSWORD}abc\n    {OTHER}def\n  port: 1\n",
    f"auth:\n  token: |-\n    {PASSWORD}\n\n    second{OTHER}\nnext: 1\n",
    f"password: |2\n  {PASSWORD} {OTHER}\n",
    f'"api_key": >  # rotated monthly\n    {PASSWORD}\n    {OTHER}\n',
    f"- name: db\n  password: |\n    {PASSWORD}\n    {OTHER}\n- name: cache\n",
    f"password: |\r\n  {PASSWORD}\r\n  {OTHER}\r\nport: 1\r\n",
], ids=["literal", "folded-strip", "strip-blank-line", "indent-indicator", "quoted-key-comment", "list-item",
        "crlf"])
def test_every_line_of_a_block_scalar_under_a_credential_key_goes(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and PASSWORD[-8:] not in out and OTHER[:8] not in out
    assert out.count("[REDACTED:yaml-block-credential]") == 1, out
    # The key and the lines after the block stay.
    assert out.split("[REDACTED")[0] == text[:text.index(PASSWORD)]


def test_the_lines_after_the_block_stay_as_they_were() -> None:
    text = f"db:\n  password: |\n    {PASSWORD}\n    {OTHER}\n  port: 5432\nnext: 1\n"
    assert redact(text) == "db:\n  password: |\n    [REDACTED:yaml-block-credential]\n  port: 5432\nnext: 1\n"


def test_a_plain_value_indented_below_its_key_goes() -> None:
    assert redact(f"password:\n  {PASSWORD}\nport: 1\n") == \
        "password:\n  [REDACTED:yaml-block-credential]\nport: 1\n"


@pytest.mark.parametrize("text", [
    "description: |\n  The token is used to call the API.\n  See the docs.\n",
    "secret_name: |\n  db-credentials\n",
    "run: |\n  echo $TOKEN\n  make deploy\n",
    "password: |\n  {{ .Values.db.password }}\n",
    "token: |\n  ${{ secrets.DEPLOY_TOKEN }}\n",
    "password:\n  secretKeyRef:\n    name: db\n    key: password\n",
    "api_key:\n  existingSecret: foo\n",
    "tokens:\n  - a\n  - b\n",
    "password:\n  &anchor\n",
    "password:\nnext: value\n",
    "- password: |\n  not-the-value-at-the-key-column\n",
    "token:\n  # a comment\n  name: x\n",
    "token:\n  access_token\n",
], ids=["description", "weak-key", "run-script", "helm-template", "actions-expression", "secret-key-ref",
        "nested-mapping", "list", "anchor", "sibling-key", "not-indented-past-key", "comment-then-mapping",
        "code-name"])
def test_block_text_that_is_no_credential_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    f"export API_TOKEN={PASSWORD}\\\n{OTHER}\n",
    f'export API_TOKEN="{PASSWORD}\\\n{OTHER}"\n',
    f'  password: "{PASSWORD}\\\n    {OTHER}"\n',
    f"ENV DB_PASSWORD={PASSWORD}\\\n{OTHER}\\\n{PASSWORD[::-1]}\n",
], ids=["unquoted", "double-quoted", "yaml-double-quoted", "three-lines"])
def test_a_line_continuation_inside_a_credential_value_goes_with_it(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and OTHER[:8] not in out and PASSWORD[::-1][:8] not in out, out
    assert out.count("[REDACTED:generic-assignment]") == 1


@pytest.mark.parametrize("text", [
    "CFLAGS=-O2\\\n-g\n",
    "export API_TOKEN=$TOKEN \\\n  && make\n",
])
def test_continuations_that_hold_no_credential_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    "existingSecret: app-postgresql-auth\n",
    "auth:\n  existingPasswordSecret: redis-auth\n",
])
def test_a_helm_charts_existing_secret_name_stays(text: str) -> None:
    assert redact(text) == text
