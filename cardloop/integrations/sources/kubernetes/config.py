"""The Kubernetes source as config.toml's `[sources.kubernetes]` describes it."""

from __future__ import annotations

from cardloop.contracts.config import Config
from cardloop.integrations.sources.kubernetes.source import KubernetesSource
from cardloop.integrations.upstream import UpstreamError


def from_config(name: str, config: Config) -> KubernetesSource:
    k = config.sources.kubernetes
    try:
        return KubernetesSource.connect(
            {repo: (s.namespace, s.selector) for repo, s in k.services.items()},
            kubeconfig=k.kubeconfig, context=k.context, environ=config.env, count=config.token_counter().count,
            excerpt_tokens=k.excerpt_tokens, tail_lines=k.tail_lines, since_seconds=k.since_seconds,
            timeout=k.timeout)
    except Exception as exc:  # no kubeconfig, no in-cluster account: the source is not set up here
        raise UpstreamError(f"Kubernetes is not configured: {type(exc).__name__}: {exc}",
                            kind="not_configured", retryable=False) from None
