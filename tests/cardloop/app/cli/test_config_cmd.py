"""`cardloop config show` / `config check` as a user runs them (issue 12 item 7): in this process
(inproc.py says why), `config show` as the installed script."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.cardloop.app.cli.inproc import run_cli
from tests.cardloop.app.cli.procs import CLI
from tests.conftest import BUNDLED_CONFIG, ROOT

SECRET_VALUES = {
    "DATABASE_URL": "postgresql://cardloop_app:pg-pass-4711@db.example:5432/cardloop",
    "CARDLOOP_ADMIN_TOKEN": "admin-token-value-9f3",
    "CARDLOOP_GITHUB_TOKEN": "ghp_valuethatmustnotprint000000000000",
    "CARDLOOP_GENERIC_WEBHOOK_SECRET": "generic-hook-secret-55",
    "CARDLOOP_CODEC_KEYS": "codec-key-material-77",
    "ANTHROPIC_API_KEY": "sk-ant-value-must-not-print",
}


def clean_env(env: dict[str, str]) -> dict[str, str]:
    """`env` over the machine's environment less its cardloop and model variables."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("CARDLOOP_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "TEMPORAL_")) and k != "DATABASE_URL"}
    return {**base, **env}


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env=clean_env(env))


def run_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, cwd=ROOT, env=clean_env(env),
                          timeout=60)


def test_show_names_the_store_in_use_and_every_secret_without_a_value() -> None:
    out = run_script("config", "show", env=SECRET_VALUES)
    assert out.returncode == 0, out.stderr
    for value in SECRET_VALUES.values():
        assert value not in out.stdout
    assert "pg-pass-4711" not in out.stdout
    data = json.loads(out.stdout)
    assert data["store"]["effective"]["backend"] == "postgresql"
    assert data["store"]["effective"]["from"] == "DATABASE_URL"
    assert "db.example" in data["store"]["effective"]["url"]
    secrets = data["secrets"]
    for name in SECRET_VALUES:
        assert secrets[name]["status"] == "set", name
    for name in ("CARDLOOP_TRELLO_SECRET", "TEMPORAL_API_KEY"):
        assert secrets[name]["status"] == "unset", name
    for name in ("CARDLOOP_LINEAR_WEBHOOK_SECRET", "CARDLOOP_JIRA_WEBHOOK_SECRET",
                 "CARDLOOP_GITHUB_WEBHOOK_SECRET", "CARDLOOP_CODEC_SERVER_TOKEN"):
        assert name in secrets, name
    assert "profiles.claude.api_key_env" in secrets["ANTHROPIC_API_KEY"]["used_by"]
    assert "boards.linear.write_token_env" in secrets["CARDLOOP_LINEAR_API_KEY"]["used_by"]


def test_check_warns_naming_the_stages_that_need_the_missing_key() -> None:
    out = run("config", "check", env={})
    assert out.returncode == 0, out.stderr
    assert "1 warning" in out.stdout
    warning = out.stderr.strip()
    assert warning.startswith("warning: ANTHROPIC_API_KEY is not set")
    for needle in ("planning", "coding", "review", "testing", "error_fixing", "summarizer", "gateway"):
        assert needle in warning, needle
    out = run("config", "check", env={"ANTHROPIC_API_KEY": "sk-ant-set"})
    assert out.returncode == 0 and "warning" not in out.stdout + out.stderr


def test_a_bad_short_port_variable_is_named_as_the_user_set_it() -> None:
    out = run("config", "check", env={"CARDLOOP_API_PORT": "notaport"})
    assert out.returncode == 2
    assert "api.port (from CARDLOOP_API_PORT)" in out.stderr
    assert "CARDLOOP_API__PORT" not in out.stderr


def test_a_per_token_limit_above_the_tenants_own_names_the_variable_it_came_from(
        config_file: Callable[[str], Path]) -> None:
    """The one configuration error that once named its key but not the variable that set its value."""
    path = config_file(BUNDLED_CONFIG + "\n[tenants.limrpm]\nrepos = []\n[tenants.limrpm.limits]\n"
                                        "requests_per_minute = 3\n")
    out = run("--config", str(path), "config", "check",
              env={"CARDLOOP_LIMITS__PER_TOKEN__REQUESTS_PER_MINUTE": "10"})
    assert out.returncode == 2
    assert out.stderr.splitlines()[1:] == [
        "  tenants.limrpm.limits.per_token.requests_per_minute (from CARDLOOP_LIMITS__PER_TOKEN__REQUESTS_PER_MINUTE): "
        "10 is above the tenant's own requests_per_minute (3), so it would never apply; lower it or set 0 "
        "(no per-token limit)"]


def test_check_refuses_malformed_codec_keys_as_the_worker_would() -> None:
    """`config check` said ok while the same keys stopped `cardloop worker` (exit 2)."""
    out = run("config", "check", env={"CARDLOOP_CODEC_KEYS": "bad"})
    assert out.returncode == 2, out.stdout
    assert "CARDLOOP_CODEC_KEYS: entry 1 is not 'kid:base64key'" in out.stderr and "Traceback" not in out.stderr
    good = run("codec-key", "--kid", "k1", env={}).stdout.strip()
    assert run("config", "check", env={"CARDLOOP_CODEC_KEYS": good}).returncode == 0


def test_a_typo_in_a_stage_name_in_the_environment_says_the_stage_is_unknown() -> None:
    out = run("config", "check", env={"CARDLOOP_STAGES__CODNG__MAX_ITERATIONS": "3"})
    assert out.returncode == 2
    assert ("stages.codng (from CARDLOOP_STAGES__CODNG__MAX_ITERATIONS): unknown stage (expected one of: "
            "planning, coding, review, testing, error_fixing); did you mean 'coding'?") in out.stderr
    assert "Field required" not in out.stderr and "profile" not in out.stderr  # not a missing key of a non-stage
