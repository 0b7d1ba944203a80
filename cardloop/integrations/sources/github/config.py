"""The GitHub sources as config.toml's `[sources.github]` and the environment describe them."""

from __future__ import annotations

from cardloop.contracts.config import Config
from cardloop.integrations.sources.github.actions import GitHubActionsSource
from cardloop.integrations.sources.github.client import GitHubClient
from cardloop.integrations.sources.github.common import GitHubSource
from cardloop.integrations.sources.github.failed_tests import GitHubTestResultsSource
from cardloop.integrations.sources.github.reviews import GitHubReviewsSource
from cardloop.integrations.upstream import UpstreamError


def client_from_config(config: Config) -> GitHubClient:
    g = config.sources.github
    token = config.secret(g.token_env) if g.token_env else None
    app_key = config.secret(g.app_private_key_env) if g.installation_id else None
    app_id = config.env.get(g.app_id_env) if g.installation_id else None
    if token is None and app_key is None:
        raise UpstreamError(f"no GitHub credentials: set {g.token_env}, or configure a GitHub App "
                            f"({g.app_id_env}, {g.app_private_key_env}, sources.github.installation_id)",
                            kind="not_configured", retryable=False)
    try:
        return GitHubClient(g.api_url, token=token if app_key is None else None, app_id=app_id,
                            app_private_key=app_key, installation_id=g.installation_id or None,
                            graphql_url=g.graphql_url or None, timeout=g.timeout)
    except ValueError as exc:
        raise UpstreamError(f"sources.github: {exc}", kind="not_configured", retryable=False) from None


def from_config(name: str, config: Config) -> GitHubSource:
    """`github_actions`, `github_reviews` or `github_tests`."""
    g = config.sources.github
    count = config.token_counter().count
    client = client_from_config(config)
    if name == "github_actions":
        return GitHubActionsSource(client, max_runs=g.max_runs, excerpt_tokens=g.excerpt_tokens, count=count)
    if name == "github_reviews":
        return GitHubReviewsSource(client, count=count)
    if name == "github_tests":
        return GitHubTestResultsSource(client, max_runs=g.max_runs, excerpt_tokens=g.excerpt_tokens, count=count)
    raise ValueError(f"not a GitHub source: {name!r}")
