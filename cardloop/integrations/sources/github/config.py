"""The GitHub sources as config.toml's `[sources.github]` and the environment describe them."""

from __future__ import annotations

from cardloop.contracts.config import Config
from cardloop.integrations.access import TenantAccess
from cardloop.integrations.sources.github.actions import GitHubActionsSource
from cardloop.integrations.sources.github.client import GitHubClient, parse_pr_ref
from cardloop.integrations.sources.github.common import GitHubSource
from cardloop.integrations.sources.github.failed_tests import GitHubTestResultsSource
from cardloop.integrations.sources.github.reviews import GitHubReviewsSource
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card


def client_from_config(config: Config, access: TenantAccess | None = None) -> GitHubClient:
    """The service's client, or with `access` the tenant's: its own token when it has one (never
    the service's App or token then), else the service's credentials."""
    g = config.sources.github
    if access is not None and access.token is not None:
        try:
            return GitHubClient(g.api_url, token=access.token, graphql_url=g.graphql_url or None, timeout=g.timeout)
        except ValueError as exc:
            raise UpstreamError(f"sources.github: {exc}", kind="not_configured", retryable=False) from None
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


def from_config(name: str, config: Config, access: TenantAccess | None = None) -> GitHubSource:
    """`github_actions`, `github_reviews` or `github_tests`; with `access`, for that tenant."""
    g = config.sources.github
    count = config.token_counter().count
    client = client_from_config(config, access)
    if name == "github_actions":
        return GitHubActionsSource(client, max_runs=g.max_runs, excerpt_tokens=g.excerpt_tokens, count=count)
    if name == "github_reviews":
        return GitHubReviewsSource(client, count=count)
    if name == "github_tests":
        return GitHubTestResultsSource(client, max_runs=g.max_runs, excerpt_tokens=g.excerpt_tokens, count=count)
    raise ValueError(f"not a GitHub source: {name!r}")


def repos_read(card: Card) -> tuple[str, ...]:
    """Every repository the GitHub sources may call for this card: the pull request's that its
    url or id names (GitHubClient.resolve reads that one), and `card.repo`."""
    ref = parse_pr_ref(card)
    found = [ref.repo] if ref else []
    if card.repo and card.repo.lower() not in {r.lower() for r in found}:
        found.append(card.repo)
    return tuple(found)
