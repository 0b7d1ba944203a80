"""The context-source family: one entry per source, with its name (as `[context.sources]` in
config.toml writes it), the label the prompt shows, the context kinds it produces (a
successful gather replaces all earlier items of those kinds) and how it is built from config.
A new source is one module with a `from_config(name, config)` plus one line here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cardloop.contracts.config import Config
from cardloop.integrations.lazy import Lazy
from cardloop.integrations.sources.base import Source
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import ContextKind


@dataclass(frozen=True)
class SourceEntry:
    name: str
    label: str
    kinds: tuple[ContextKind, ...]
    # (name, config) -> the source; raises UpstreamError (not retryable) when it cannot be set up here.
    build: Callable[[str, Config], Source]


_PKG = "cardloop.integrations.sources"

SOURCES: dict[str, SourceEntry] = {e.name: e for e in (
    SourceEntry("repository", "Repository files, ADRs and docs",
                (ContextKind.SOURCE_FILE, ContextKind.ADR, ContextKind.LIBRARY_DOC),
                Lazy(f"{_PKG}.repository.config", "from_config")),
    SourceEntry("github_actions", "GitHub Actions build logs", (ContextKind.BUILD_LOG,),
                Lazy(f"{_PKG}.github.config", "from_config")),
    SourceEntry("github_reviews", "Pull request review threads", (ContextKind.REVIEW_COMMENT,),
                Lazy(f"{_PKG}.github.config", "from_config")),
    SourceEntry("github_tests", "Test results", (ContextKind.TEST_RESULT,),
                Lazy(f"{_PKG}.github.config", "from_config")),
    SourceEntry("kubernetes", "Kubernetes pod logs", (ContextKind.POD_LOG,),
                Lazy(f"{_PKG}.kubernetes.config", "from_config")),
)}


def source_label(name: str) -> str:
    entry = SOURCES.get(name)
    return entry.label if entry else name


def build_source(name: str, config: Config) -> Source:
    """Raises UpstreamError (not retryable) when the source cannot be configured here."""
    entry = SOURCES.get(name)
    if entry is None:
        raise UpstreamError(f"unknown context source {name!r}; sources: {', '.join(SOURCES)}",
                            kind="not_configured", retryable=False)
    return entry.build(name, config)
