"""The repository source as config.toml's `[sources.repository]` describes it."""

from __future__ import annotations

from pathlib import Path

from cardloop.contracts.config import Config
from cardloop.contracts.secrets import Secret
from cardloop.integrations.access import TenantAccess, tenant_dir
from cardloop.integrations.sources.repository.source import RepositorySource


def from_config(name: str, config: Config, access: TenantAccess | None = None) -> RepositorySource:
    """The service's source, or with `access` the tenant's: git gets the tenant's own token when
    it has one (else the service's), and clones live in the tenant's own cache folder."""
    r = config.sources.repository
    token: Secret | None = config.secret(r.token_env) if r.token_env else None
    cache_dir = Path(r.cache_dir).expanduser()
    if access is not None:
        token = access.token if access.token is not None else token
        cache_dir = tenant_dir(config, cache_dir, access.tenant)
    return RepositorySource(
        cache_dir, clone_url_template=r.clone_url, token=token, depth=r.depth, history_weight=r.history_weight,
        adr_globs=r.adr_globs, doc_globs=r.doc_globs, max_files=r.max_files,
        max_file_tokens=r.max_file_tokens, max_adrs=r.max_adrs, counter=config.token_counter().count)
