"""Which repositories a tenant's cards may read, and with which GitHub credentials.

Without a `[tenants]` table (one trust domain, a laptop) nothing is checked: the service's
credentials read whatever repository a card names, as they always did. With one, every read of
a repository on behalf of a card goes through here first:

    tenant_access(config, tenant)        the tenant's credentials; AccessDenied when it is not listed
    repo_access(config, tenant, repo)    ...and AccessDenied when `repo` is not on its allow-list
    github_token / git_token             the token to use (the tenant's own, else the service's)
    tenant_dir(config, base, tenant)     a tenant's own folder under a shared cache (clones)

A refusal names tenant and repository, never a token, and never what another tenant may read
(the message reaches the card's prompt). It is decided before any request or clone, so a
refused repository is never fetched with any credential. Callers that cache clients per
credential key them by tenant (TenantAccess.key), so one tenant's client never serves another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from cardloop.contracts.config import Config, TenantConfig
from cardloop.contracts.secrets import Secret
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.tenant_id import is_tenant_id

# The cache key of an unscoped configuration's one set of credentials; no tenant is named "".
SERVICE = ""
# What a repository name can be (as Card.repo); `*` would match a newline or a slash otherwise.
_REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\Z")


class AccessDenied(UpstreamError):
    """The [tenants] policy refuses a read: not retryable, and no request was made."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="forbidden", retryable=False, status=None)


@dataclass(frozen=True)
class TenantAccess:
    """A tenant's GitHub credentials as config and environment give them."""

    tenant: str
    scoped: bool                 # a [tenants] table exists: allow-lists apply
    token: Secret | None = None  # the tenant's own token; None: the service's credentials
    token_env: str = ""          # the variable it came from, for messages
    repos: tuple[str, ...] = ()  # the tenant's allow-list (scoped only)

    @property
    def key(self) -> str:
        """What a per-credential cache is keyed by: the tenant, or SERVICE when unscoped."""
        return self.tenant if self.scoped else SERVICE

    def allows(self, repo: str) -> bool:
        return not self.scoped or repo_allowed(self.repos, repo)


def repo_allowed(patterns: tuple[str, ...] | list[str], repo: str) -> bool:
    """`repo` ("owner/name") matches one of `patterns` part by part, case-insensitively (GitHub
    names are). Wildcards never cross the slash: "acme/*" admits acme's repositories and no
    other owner's, and "acme/*" never admits "acme/x/../../globex/y" (not a name: refused)."""
    if not _REPO_NAME.match(repo):
        return False
    owner, _, name = repo.lower().partition("/")
    if owner in (".", "..") or name in (".", ".."):
        return False
    for pattern in patterns:
        p_owner, p_sep, p_name = pattern.lower().partition("/")
        if p_sep and fnmatchcase(owner, p_owner) and fnmatchcase(name, p_name):
            return True
    return False


def tenant_access(config: Config, tenant: str) -> TenantAccess:
    """The tenant's credentials. Raises AccessDenied for a tenant [tenants] does not list, and
    UpstreamError(not_configured) when its token variable is named but not set: a tenant with
    its own token never falls back to the service's."""
    if config.tenants is None:
        return TenantAccess(tenant=tenant, scoped=False)
    cfg = _listed(config.tenants, tenant)
    token = None
    if cfg.github_token_env:
        token = config.secret(cfg.github_token_env)
        if token is None:
            raise UpstreamError(f"tenant {tenant!r}: its GitHub token is not set "
                                f"(environment variable {cfg.github_token_env})",
                                kind="not_configured", retryable=False)
    return TenantAccess(tenant=tenant, scoped=True, token=token, token_env=cfg.github_token_env,
                        repos=tuple(cfg.repos))


def _listed(tenants: dict[str, TenantConfig], tenant: str) -> TenantConfig:
    cfg = tenants.get(tenant)
    if cfg is None or not is_tenant_id(tenant):
        raise AccessDenied(f"tenant {tenant!r} has no [tenants.{tenant}] section in the configuration, "
                           "so its cards may read no repository")
    return cfg


def check_repo(access: TenantAccess, repo: str) -> None:
    """Raises AccessDenied when `repo` is not on the tenant's allow-list."""
    if not access.allows(repo):
        raise AccessDenied(f"tenant {access.tenant!r} may not read repository {repo!r} "
                           f"(not in [tenants.{access.tenant}] repos); nothing was fetched")


def repo_access(config: Config, tenant: str, repo: str) -> TenantAccess:
    """The credentials `tenant` reads `repo` with; AccessDenied when it may not."""
    access = tenant_access(config, tenant)
    check_repo(access, repo)
    return access


def github_token(config: Config, tenant: str, repo: str) -> Secret | None:
    """The token for GitHub's API: the tenant's own, else [sources.github] token_env (None: unset;
    the service may then use its GitHub App)."""
    access = repo_access(config, tenant, repo)
    if access.token is not None:
        return access.token
    env_name = config.sources.github.token_env
    return config.secret(env_name) if env_name else None


def git_token(config: Config, tenant: str, repo: str) -> Secret | None:
    """The token git clones and pushes `repo` with for `tenant` (the workspace's clones too):
    the tenant's own, else [sources.repository] token_env. AccessDenied when it may not."""
    access = repo_access(config, tenant, repo)
    if access.token is not None:
        return access.token
    env_name = config.sources.repository.token_env
    return config.secret(env_name) if env_name else None


def tenant_dir(config: Config, base: str | Path, tenant: str) -> Path:
    """`base` itself when unscoped; else `base/.tenants/<tenant>`, so tenants never share a clone
    (a checkout fetched with one tenant's token is never read under another's). Owner folders
    never start with a dot, so `.tenants` meets no repository's."""
    root = Path(base).expanduser()
    if config.tenants is None:
        return root
    _listed(config.tenants, tenant)  # a listed name is a card's tenant: safe as a folder name
    return root / ".tenants" / tenant
