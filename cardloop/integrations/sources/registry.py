"""The context-source family: one entry per source, with its name (as `[context.sources]` in
config.toml writes it), the label the prompt shows, the context kinds it produces (a
successful gather replaces all earlier items of those kinds) and how it is built from config.
A new source is one module with a `from_config(name, config)` plus one line here.

Tenants: with a `[tenants]` table, `build_source` answers a TenantScopedSource that, for each
card, first asks cardloop.integrations.access whether the card's tenant may read every
repository the source would read for it (refused: AccessDenied, before any request or clone),
then gathers through that tenant's own instance, built with the tenant's credentials
(`from_config(name, config, access)`) and cached under the tenant's name only."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from cardloop.contracts.config import Config
from cardloop.integrations.access import SERVICE, TenantAccess, check_repo, tenant_access
from cardloop.integrations.lazy import Lazy
from cardloop.integrations.sources.base import Source, SourceRequest, SourceResult
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card, ContextKind


def card_repo(card: Card) -> tuple[str, ...]:
    return (card.repo,) if card.repo else ()


@dataclass(frozen=True)
class SourceEntry:
    name: str
    label: str
    kinds: tuple[ContextKind, ...]
    # (name, config[, access]) -> the source; raises UpstreamError (not retryable) when it cannot
    # be set up here. `access` is passed only to a source with `credentials`.
    build: Callable[..., Source]
    # The repositories a gather for this card may read: each must be on the tenant's allow-list.
    repos: Callable[[Card], tuple[str, ...]] = card_repo
    # True: built with the card's tenant's GitHub credentials (one instance per tenant);
    # False: one instance for every tenant (credentials of its own, e.g. a kubeconfig).
    credentials: bool = False


_PKG = "cardloop.integrations.sources"
_GITHUB_REPOS = Lazy(f"{_PKG}.github.config", "repos_read")

SOURCES: dict[str, SourceEntry] = {e.name: e for e in (
    SourceEntry("repository", "Repository files, ADRs and docs",
                (ContextKind.SOURCE_FILE, ContextKind.ADR, ContextKind.LIBRARY_DOC),
                Lazy(f"{_PKG}.repository.config", "from_config"), credentials=True),
    SourceEntry("github_actions", "GitHub Actions build logs", (ContextKind.BUILD_LOG,),
                Lazy(f"{_PKG}.github.config", "from_config"), _GITHUB_REPOS, credentials=True),
    SourceEntry("github_reviews", "Pull request review threads", (ContextKind.REVIEW_COMMENT,),
                Lazy(f"{_PKG}.github.config", "from_config"), _GITHUB_REPOS, credentials=True),
    SourceEntry("github_tests", "Test results", (ContextKind.TEST_RESULT,),
                Lazy(f"{_PKG}.github.config", "from_config"), _GITHUB_REPOS, credentials=True),
    SourceEntry("kubernetes", "Kubernetes pod logs", (ContextKind.POD_LOG,),
                Lazy(f"{_PKG}.kubernetes.config", "from_config")),
)}


def source_label(name: str) -> str:
    entry = SOURCES.get(name)
    return entry.label if entry else name


def build_source(name: str, config: Config) -> Source:
    """Raises UpstreamError (not retryable) when the source cannot be configured here. Without
    [tenants] the source itself (the service's credentials, any repository); with it, a
    TenantScopedSource (module docstring), safe to share between tenants."""
    entry = SOURCES.get(name)
    if entry is None:
        raise UpstreamError(f"unknown context source {name!r}; sources: {', '.join(SOURCES)}",
                            kind="not_configured", retryable=False)
    if config.tenants is None:
        return entry.build(name, config)
    return TenantScopedSource(entry, config)


class TenantScopedSource:
    """One source for every tenant: checks each card's repositories against its tenant's
    allow-list, then gathers with that tenant's own instance (its token, its clone folder)."""

    def __init__(self, entry: SourceEntry, config: Config) -> None:
        self.entry = entry
        self.name = entry.name
        self.config = config
        self._by_tenant: dict[str, Source] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TenantScopedSource({self.name!r}, tenants built: {sorted(self._by_tenant)})"

    def gather(self, request: SourceRequest) -> SourceResult:
        card = request.card
        access = tenant_access(self.config, card.tenant)
        for repo in self.entry.repos(card):
            check_repo(access, repo)
        return self.for_tenant(access).gather(request)

    def for_tenant(self, access: TenantAccess) -> Source:
        """The tenant's instance, built on first use. Keyed by the tenant alone: no other key
        can reach an instance built with its token."""
        key = access.key if self.entry.credentials else SERVICE
        with self._lock:
            source = self._by_tenant.get(key)
            if source is None:
                source = (self.entry.build(self.name, self.config, access) if self.entry.credentials
                          else self.entry.build(self.name, self.config))
                self._by_tenant[key] = source
            return source

    def close(self) -> None:
        with self._lock:
            sources, self._by_tenant = list(self._by_tenant.values()), {}
        for source in sources:
            close = getattr(source, "close", None)
            if close is not None:
                close()
