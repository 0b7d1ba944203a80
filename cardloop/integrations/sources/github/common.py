"""What the three GitHub sources share: the client they call through, the token counter,
and how an item's title and source are bounded."""

from __future__ import annotations

import abc

from cardloop.integrations.sources.base import SourceRequest, SourceResult, default_counter
from cardloop.integrations.sources.github.client import GitHubClient
from cardloop.prompts.logs import Counter

FAILED_CONCLUSIONS = frozenset({"failure", "timed_out", "startup_failure"})
MAX_TITLE = 500
MAX_SOURCE = 500


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class GitHubSource(abc.ABC):
    """The shared part of the three GitHub sources; each subclass implements `_gather`."""

    name = "github"

    def __init__(self, client: GitHubClient, *, count: Counter | None = None) -> None:
        self.client = client
        self.count = count or default_counter()

    def close(self) -> None:
        self.client.close()

    def gather(self, request: SourceRequest) -> SourceResult:
        # Objects PyGithub completes lazily may call GitHub anywhere below: map what escapes.
        with self.client.calling(f"gathering {self.name} for card {request.card.id}"):
            return self._gather(request)

    @abc.abstractmethod
    def _gather(self, request: SourceRequest) -> SourceResult:
        """What the source finds for the card (GitHub calls inside `client.calling`)."""

