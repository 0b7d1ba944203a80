"""What every context source is: given a card and a stage, items with provenance.

A source does I/O (GitHub, Kubernetes, git) and returns ContextItems whose `source` names
where each came from and whose `created_at` says when; the prompt core redacts, isolates,
ranks and budgets them. Large raw texts (a whole CI log) are returned in `blobs` so the store
keeps them whole for later research while the item carries what a developer reads first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cardloop.prompts.card import Card, ContextItem
from cardloop.prompts.stages import Stage


class SourceUnavailable(Exception):
    """The source could not answer: `retryable` says whether trying again may help (a timeout,
    a 5xx, a rate limit until `retry_after` seconds) or not (a 403, no credentials)."""

    def __init__(self, reason: str, *, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class SourceRequest:
    card: Card          # fields, history (for mentioned files and stack traces) and notes
    stage: Stage


@dataclass(frozen=True)
class SourceResult:
    source: str                                   # the source's name, e.g. "github_actions"
    items: tuple[ContextItem, ...] = ()
    blobs: dict[str, str] = field(default_factory=dict)   # label -> full text to keep whole
    notes: tuple[str, ...] = ()                   # what was looked at, for `cardloop context`


class Source(Protocol):
    name: str

    def gather(self, request: SourceRequest) -> SourceResult:
        """Raises SourceUnavailable when the source cannot answer."""
        ...
