"""Passwords on command lines and in .netrc, where no `=` or `:` marks the value: a CI log, a
tool's output or a script in the repository (`docker login -u bot -p ...`, `mysql -p...`,
`--db-password ...`). References and prompts for a password stay as they are."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import redact

PW = "Zx9Qm2Lk" + "8Wt4Rv"


@pytest.mark.parametrize(("text", "rule"), [
    (f"docker login -u bot -p {PW} ghcr.io", "command-login-password"),
    (f"+ helm registry login registry.acme.dev --username ci --password {PW}", "command-line-password"),
    (f"machine github.com login bob password {PW}\n", "command-login-password"),
    (f"mysql -u root -p{PW} app < dump.sql", "mysql-password-flag"),
    (f"mysqldump -h db -uroot -p'{PW}' app", "mysql-password-flag"),
    (f"sshpass -p '{PW}' ssh deploy@10.0.0.3", "sshpass-password"),
    (f"redis-cli -h cache -a {PW} PING", "redis-cli-password"),
    (f"./manage.py createsuperuser --db-password {PW} --noinput", "command-line-password"),
    (f"vault login --token \"{PW}\"", "command-line-password"),
])
def test_the_password_after_its_flag_is_redacted(text: str, rule: str) -> None:
    out = redact(text)
    assert PW not in out and f"[REDACTED:{rule}]" in out


@pytest.mark.parametrize("text", [
    "echo $CR_PAT | docker login ghcr.io -u bot --password-stdin",
    "docker login -u bot -p $DOCKER_PASSWORD ghcr.io",
    "docker login -u bot -p ${{ secrets.DOCKER_PASSWORD }} ghcr.io",
    "mysql -u root -p app   # asks for the password",
    "ssh -p 2222 login@bastion",
    "git push --token-file token_path",
    "cli --password <password> --user <user>",
    "After login the password field is cleared (see login.py).",
    "kubectl create token default --duration 3600s",
])
def test_references_and_prompts_stay(text: str) -> None:
    assert redact(text) == text
