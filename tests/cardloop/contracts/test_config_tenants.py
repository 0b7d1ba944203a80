"""[tenants] in config.toml: what a bad entry says at start-up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import ConfigError
from tests.conftest import BUNDLED_CONFIG


def test_no_tenants_table_is_none_and_a_table_lists_tenants(config_file: Callable[[str], Path]) -> None:
    assert load_config(REPO_CONFIG, env={}).tenants is None
    path = config_file(BUNDLED_CONFIG + '\n[tenants.acme]\ngithub_token_env = "ACME_GITHUB_TOKEN"\n'
                                        'repos = ["acme/*", "acme-oss/sdk"]\n\n[tenants.globex]\n')
    config = load_config(path, env={})
    assert config.tenants is not None
    assert config.tenants["acme"].repos == ["acme/*", "acme-oss/sdk"]
    assert config.tenants["acme"].github_token_env == "ACME_GITHUB_TOKEN"
    assert config.tenants["globex"].repos == [] and config.tenants["globex"].github_token_env == ""


def test_tenants_come_from_the_environment_too() -> None:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_TENANTS__ACME__REPOS": '["acme/*"]'})
    assert config.tenants is not None and config.tenants["acme"].repos == ["acme/*"]


@pytest.mark.parametrize(("table", "message"), [
    ('[tenants.Acme]\nrepos = ["acme/*"]', r"tenants\.Acme: not a tenant name"),
    ('[tenants."acme corp"]\nrepos = []', r"tenants\.acme corp: not a tenant name"),
    ('[tenants."acme\\n"]\nrepos = []', r"tenants\.acme\n: not a tenant name"),
    ('[tenants.acme]\nrepos = ["acme/*\\n"]', r"tenants\.acme\.repos: 'acme/\*\\n' is not"),
    ('[tenants.acme]\nrepos = ["acme"]', r"tenants\.acme\.repos: 'acme' is not an \"owner/name\" pattern"),
    ('[tenants.acme]\nrepos = ["acme/*/x"]', r"tenants\.acme\.repos: 'acme/\*/x' is not"),
    ('[tenants.acme]\nrepos = ["acme/[ab]*"]', r"tenants\.acme\.repos: 'acme/\[ab\]\*' is not"),
    ('[tenants.acme]\nrepos = "acme/*"', r"tenants\.acme\.repos: Input should be a valid list"),
    ('[tenants.acme]\ngithub_token_env = "ACME TOKEN"', r"tenants\.acme\.github_token_env: String should match"),
    ('[tenants.acme]\ntoken = "ghp_x"', r"tenants\.acme\.token: unknown key"),
    ('[tenants.a]\ngithub_token_env = "T"\n[tenants.b]\ngithub_token_env = "T"',
     r"tenants\.b\.github_token_env: tenant 'a' uses T too; each tenant gets its own token"),
])
def test_bad_tenant_entries_are_named(config_file: Callable[[str], Path], table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(config_file(BUNDLED_CONFIG + "\n" + table + "\n"), env={})
