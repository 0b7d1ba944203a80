"""The repository source as config.toml's `[sources.repository]` describes it."""

from __future__ import annotations

from pathlib import Path

from cardloop.contracts.config import Config
from cardloop.integrations.sources.repository.source import RepositorySource


def from_config(name: str, config: Config) -> RepositorySource:
    r = config.sources.repository
    return RepositorySource(
        Path(r.cache_dir).expanduser(), clone_url_template=r.clone_url,
        token=config.secret(r.token_env) if r.token_env else None, depth=r.depth,
        adr_globs=r.adr_globs, doc_globs=r.doc_globs, max_files=r.max_files,
        max_file_tokens=r.max_file_tokens, max_adrs=r.max_adrs, counter=config.token_counter().count)
