"""Building context sources from config.toml and the environment (secrets only from there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cardloop.contracts.config import SOURCE_NAMES, Config
from cardloop.integrations.sources.base import Source, SourceUnavailable


def _github_client(config: Config) -> Any:
    from cardloop.integrations.sources.github import GitHubClient

    g = config.sources.github
    token = config.secret(g.token_env) if g.token_env else None
    app_key = config.secret(g.app_private_key_env) if g.installation_id else None
    app_id = config.env.get(g.app_id_env) if g.installation_id else None
    if token is None and app_key is None:
        raise SourceUnavailable(f"no GitHub credentials: set {g.token_env}, or configure a GitHub App "
                                f"({g.app_id_env}, {g.app_private_key_env}, sources.github.installation_id)",
                                retryable=False)
    try:
        return GitHubClient(g.api_url, token=token if app_key is None else None, app_id=app_id,
                            app_private_key=app_key, installation_id=g.installation_id or None,
                            graphql_url=g.graphql_url or None, timeout=g.timeout)
    except ValueError as exc:
        raise SourceUnavailable(f"sources.github: {exc}", retryable=False) from None


def build_source(name: str, config: Config) -> Source:
    """Raises SourceUnavailable (not retryable) when the source cannot be configured here."""
    count = config.token_counter().count
    if name in ("github_actions", "github_reviews", "github_tests"):
        from cardloop.integrations.sources.github import (
            GitHubActionsSource,
            GitHubReviewsSource,
            GitHubTestResultsSource,
        )

        g = config.sources.github
        client = _github_client(config)
        if name == "github_actions":
            return GitHubActionsSource(client, max_runs=g.max_runs, excerpt_tokens=g.excerpt_tokens, count=count)
        if name == "github_reviews":
            return GitHubReviewsSource(client, count=count)
        return GitHubTestResultsSource(client, max_runs=g.max_runs, excerpt_tokens=g.excerpt_tokens, count=count)
    if name == "kubernetes":
        from cardloop.integrations.sources.kubernetes import KubernetesSource

        k = config.sources.kubernetes
        try:
            return KubernetesSource.connect(
                {repo: (s.namespace, s.selector) for repo, s in k.services.items()},
                kubeconfig=k.kubeconfig, context=k.context, environ=config.env, count=count,
                excerpt_tokens=k.excerpt_tokens, tail_lines=k.tail_lines, since_seconds=k.since_seconds,
                timeout=k.timeout)
        except Exception as exc:  # no kubeconfig, no in-cluster account: the source is not set up here
            raise SourceUnavailable(f"Kubernetes is not configured: {type(exc).__name__}: {exc}",
                                    retryable=False) from None
    if name == "repository":
        from cardloop.integrations.sources.repository import RepositorySource

        r = config.sources.repository
        return RepositorySource(
            Path(r.cache_dir).expanduser(), clone_url_template=r.clone_url,
            token=config.secret(r.token_env) if r.token_env else None, depth=r.depth,
            adr_globs=r.adr_globs, doc_globs=r.doc_globs, max_files=r.max_files,
            max_file_tokens=r.max_file_tokens, max_adrs=r.max_adrs, counter=count)
    raise SourceUnavailable(f"unknown context source {name!r}; sources: {', '.join(SOURCE_NAMES)}", retryable=False)
