"""What every context source is: given a card and a stage, items with provenance.

A source does I/O (GitHub, Kubernetes, git) and returns ContextItems whose `source` names
where each came from and whose `created_at` says when; the prompt core redacts, isolates,
ranks and budgets them. Large raw texts (a whole CI log) are returned in `blobs` so the store
keeps them whole for later research while the item carries what a developer reads first.
A source that cannot answer raises UpstreamError (cardloop.integrations.upstream).

A source that reads several things (a job's log per failed job, a log and events per pod)
and fails on some of them keeps what it read: the result is partial. `missing` says what was
not read and why (the items say it too, where they stand); `retry` is the first of those
failures that retrying may fix, so the context activity retries the whole gather while
attempts remain and keeps the partial result on the last one. Only a failure that leaves
nothing to show (the listing itself, the credentials) is raised."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card, ContextItem
from cardloop.prompts.logs import Counter
from cardloop.prompts.stages import Stage


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
    missing: tuple[str, ...] = ()                 # what could not be read, each with why: partial
    retry: UpstreamError | None = None            # a part failed retryably (module docstring)

    @property
    def partial(self) -> bool:
        return bool(self.missing)


class Source(Protocol):
    name: str

    def gather(self, request: SourceRequest) -> SourceResult:
        """Raises UpstreamError when the source cannot answer."""
        ...


def default_counter() -> Counter:
    """cl100k_base token counts, for a source built without the worker's counter. Imported on
    use: loading the vocabulary is needless when the caller injects its counter."""
    from cardloop.prompts.tokens import TokenCounter

    return TokenCounter("cl100k_base").count
