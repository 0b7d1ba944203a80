"""cardloop.integrations.access: which repositories a tenant may read, with which token."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.contracts.config import REPO_CONFIG, Config, load_config
from cardloop.contracts.secrets import Secret
from cardloop.integrations.access import (
    AccessDenied,
    git_token,
    github_token,
    repo_access,
    repo_allowed,
    tenant_access,
    tenant_dir,
)
from cardloop.integrations.upstream import UpstreamError

ACME_TOKEN = "ghp_AcmeTenantToken000000000000000000aaaa"
SERVICE_TOKEN = "ghp_ServiceToken00000000000000000000cccc"
GIT_SERVICE_TOKEN = "ghs_GitServiceToken000000000000000000dddd"


def config(**env: str) -> Config:
    return load_config(REPO_CONFIG, env={"CARDLOOP_GITHUB_TOKEN": SERVICE_TOKEN, **env})


SCOPED = {
    "CARDLOOP_TENANTS__ACME__GITHUB_TOKEN_ENV": '"ACME_GITHUB_TOKEN"',
    "CARDLOOP_TENANTS__ACME__REPOS": '["acme/*", "shared/sdk-?"]',
    "CARDLOOP_TENANTS__OPS__REPOS": '["ops/infra"]',   # no token of its own
    "ACME_GITHUB_TOKEN": ACME_TOKEN,
}


@pytest.mark.parametrize(("repo", "allowed"), [
    ("acme/api", True),
    ("ACME/Api", True),                 # GitHub names are case-insensitive
    ("acme/.github", True),
    ("shared/sdk-1", True),
    ("shared/sdk-10", False),           # ? is one character
    ("acme-evil/api", False),           # * stays within its part: no other owner
    ("globex/acme", False),
    ("acme/x/y", False),
    ("acme/..", False),
    ("acme/api\n", False),             # * would match it: names are checked first
    ("acme/api x", False),
    ("acme", False),
    ("", False),
])
def test_patterns_match_owner_and_name_separately(repo: str, allowed: bool) -> None:
    assert repo_allowed(["acme/*", "shared/sdk-?"], repo) is allowed


def test_without_tenants_every_tenant_reads_every_repository_with_the_service_token() -> None:
    cfg = config()
    access = repo_access(cfg, "anyone", "globex/ledger")
    assert not access.scoped and access.token is None and access.key == ""
    assert github_token(cfg, "anyone", "globex/ledger") == Secret(SERVICE_TOKEN)
    assert tenant_dir(cfg, "/cache", "anyone") == Path("/cache")


def test_a_tenant_reads_its_repositories_with_its_own_token() -> None:
    cfg = config(**SCOPED)
    access = repo_access(cfg, "acme", "acme/api")
    assert access.scoped and access.key == "acme" and access.token == Secret(ACME_TOKEN)
    assert ACME_TOKEN not in repr(access)
    assert github_token(cfg, "acme", "acme/api") == Secret(ACME_TOKEN)
    # The workspace's clones use the same rule (git_token), the service's git token only as fallback.
    assert git_token(cfg, "acme", "acme/api") == Secret(ACME_TOKEN)
    assert tenant_dir(cfg, "/cache", "acme") == Path("/cache/.tenants/acme")


def test_a_tenant_without_a_token_of_its_own_uses_the_services_for_its_repositories() -> None:
    cfg = config(**SCOPED, CARDLOOP_SOURCES__REPOSITORY__TOKEN_ENV='"GIT_TOKEN"', GIT_TOKEN=GIT_SERVICE_TOKEN)
    assert github_token(cfg, "ops", "ops/infra") == Secret(SERVICE_TOKEN)
    assert git_token(cfg, "ops", "ops/infra") == Secret(GIT_SERVICE_TOKEN)
    with pytest.raises(AccessDenied):
        git_token(cfg, "ops", "acme/api")


def test_refusals_name_tenant_and_repository_and_nothing_else() -> None:
    cfg = config(**SCOPED)
    with pytest.raises(AccessDenied) as err:
        git_token(cfg, "acme", "ops/infra")
    assert err.value.kind == "forbidden" and not err.value.retryable and err.value.status is None
    assert err.value.message == ("tenant 'acme' may not read repository 'ops/infra' "
                                 "(not in [tenants.acme] repos); nothing was fetched")
    with pytest.raises(AccessDenied) as err:
        tenant_access(cfg, "initech")
    assert "'initech'" in err.value.message and "acme" not in err.value.message and "ops" not in err.value.message
    with pytest.raises(AccessDenied):
        tenant_dir(cfg, "/cache", "initech")
    with pytest.raises(AccessDenied):
        tenant_dir(cfg, "/cache", "../acme")


def test_a_named_but_unset_token_is_an_error_not_a_fallback() -> None:
    env = {k: v for k, v in SCOPED.items() if k != "ACME_GITHUB_TOKEN"}
    with pytest.raises(UpstreamError) as err:
        github_token(config(**env), "acme", "acme/api")
    assert err.value.kind == "not_configured" and "ACME_GITHUB_TOKEN" in err.value.message
    assert SERVICE_TOKEN not in err.value.message
