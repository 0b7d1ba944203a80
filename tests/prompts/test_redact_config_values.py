"""Credentials in config syntaxes where the key and the value are apart or the value holds
escapes: an environment variable given as a name and a value (Kubernetes `env`, ECS task
definitions, Terraform), SQL that sets a password, and quoted values with backslash escapes.
Each is replaced whole; references, templates and ordinary values stay."""

from __future__ import annotations

import json

import pytest

from cardloop.prompts.redact import redact

PASSWORD = "Zx9kQ2mLp4" + "Vb7Ns1"


@pytest.mark.parametrize("text", [
    f"        env:\n        - name: DB_PASSWORD\n          value: {PASSWORD}\n",
    f"        env:\n        - name: DB_PASSWORD\n          value: \"{PASSWORD}\"\n        - name: PORT\n",
    json.dumps({"environment": [{"name": "STRIPE_API_KEY", "value": PASSWORD}]}),
    json.dumps({"env": [{"name": "AUTH_TOKEN", "value": PASSWORD}]}, indent=2),
    f'env {{\n  name  = "CLIENT_SECRET"\n  value = "{PASSWORD}"\n}}\n',
], ids=["yaml", "yaml-quoted", "ecs-json", "kubectl-json", "terraform"])
def test_a_credential_given_as_a_name_and_a_value_is_redacted(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and PASSWORD[-8:] not in out
    assert "[REDACTED:generic-assignment]" in out
    if text.startswith("{"):
        json.loads(out)


@pytest.mark.parametrize("text", [
    "- name: TOKEN_URL\n  value: https://auth.example.com/oauth/token\n",
    "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db\n      key: password\n",
    '{"name": "token_type", "value": "bearer"}',
    '{"name": "SECRET_NAME", "value": "db-credentials"}',
    "- name: API_KEY\n  value: $(API_KEY_FROM_SECRET)\n",
    '- name: DB_PASSWORD\n  value: "{{ .Values.db.password }}"\n',
    "- name: LOG_LEVEL\n  value: Zx9kQ2mLp4Vb7Ns1\n",
    "- DB_PASSWORD\n  value: Zx9kQ2mLp4Vb7Ns1\n",  # no name before it: a list of words
])
def test_names_and_values_that_hold_no_credential_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    f"CREATE ROLE app WITH LOGIN PASSWORD '{PASSWORD}';",
    f"ALTER USER app WITH ENCRYPTED PASSWORD '{PASSWORD}';",
    f"CREATE USER 'app'@'%' IDENTIFIED BY '{PASSWORD}';",
    f"ALTER USER 'app'@'localhost' IDENTIFIED WITH mysql_native_password BY '{PASSWORD}';",
    f"psql -c \"alter user app password '{PASSWORD}'\"",
    f"ALTER USER app PASSWORD 'it''s{PASSWORD}';",
])
def test_sql_that_sets_a_password_loses_it(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and PASSWORD[-8:] not in out and "[REDACTED:sql-password]" in out
    assert out.count("'") == text.count("'") - text.count("''") * 2  # the quotes around it stay


@pytest.mark.parametrize("text", [
    "cur.execute(\"ALTER USER app WITH PASSWORD '%s'\" % pw)",
    "ALTER USER app WITH PASSWORD :'pw';",
    "Enter the password 'twice' to confirm",
    "ALTER ROLE app PASSWORD NULL;",
])
def test_sql_without_a_password_literal_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    json.dumps({"password": "ab\\" + PASSWORD}),
    f'PASSWORD="ab\\${PASSWORD}"',
    f"api_key = 'x\\\\{PASSWORD}'",
], ids=["json-escaped-backslash", "shell-escaped-dollar", "python-escaped-backslash"])
def test_a_quoted_value_with_a_backslash_escape_is_redacted_whole(text: str) -> None:
    out = redact(text)
    assert PASSWORD[:8] not in out and PASSWORD[-8:] not in out
    assert "[REDACTED:generic-assignment]" in out


@pytest.mark.parametrize("text", [
    '{"token_path": "C:\\\\Users\\\\me\\\\token_store"}',
    'password_hint = "your\\\\usual"',
    'secret_key_path = "..\\\\config\\\\secret.key"',
])
def test_quoted_paths_with_backslashes_stay(text: str) -> None:
    assert redact(text) == text


def test_a_connection_strings_password_shaped_like_a_name_is_redacted() -> None:
    # All capitals and digits between dashes: taken for a separated code name (`"REFRESH_TOKEN"`)
    # when quoted; between a connection string's `;`s no code names a credential.
    text = ("Server=tcp:db.internal,1433;Database=app;User ID=svc;Password=NRAK-BRA72235AXUEKLXJIGVXLGW39DS;"
            "Encrypt=True;")
    assert redact(text) == ("Server=tcp:db.internal,1433;Database=app;User ID=svc;"
                            "Password=[REDACTED:generic-assignment];Encrypt=True;")
