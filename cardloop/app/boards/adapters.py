"""The board adapter contract and the registry the webhook routes use.

A route does, for board `name`:

    adapter = adapters[name]                                  # unknown name: 404
    secret = config.secret(adapter.secret_env)                # unset: 503 (board not configured)
    adapter.verify(request.headers, raw_body, secret.reveal(), services.clock())   # 401 / 503
    result = await adapter.parse(request.headers, raw_body)   # 400 / 502 / 503
    Ignored -> 2xx with result.reason; list[BoardEvent] -> apply each (an event whose stage is
    None names an unmapped column: acknowledge it with a reason)

Both steps raise only WebhookError for anything a sender controls; its `status` is the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

import httpx

from cardloop.app.boards.events import BoardEvent, Ignored
from cardloop.app.boards.generic import GenericAdapter
from cardloop.app.boards.github import GitHubAdapter, GitHubGraphQL
from cardloop.app.boards.jira import JiraAdapter
from cardloop.app.boards.linear import LinearAdapter
from cardloop.app.boards.trello import TrelloAdapter
from cardloop.contracts.config import Config


@runtime_checkable
class BoardAdapter(Protocol):
    name: str            # "github" | "linear" | "jira" | "trello" | "generic"
    secret_env: str      # the environment variable holding the webhook secret

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None:
        """Raise WebhookError(401) unless the raw body is signed with `secret` (503: not configured)."""
        ...

    async def parse(self, headers: Mapping[str, str], body: bytes) -> list[BoardEvent] | Ignored:
        """Canonical events, or Ignored(reason); WebhookError(400) for a malformed payload
        (GitHub also 502/503 when its GraphQL lookup fails or has no token)."""
        ...


Clock = Callable[[], float]


def _github(config: Config, http: httpx.AsyncClient, clock: Clock) -> BoardAdapter:
    github = config.board("github")
    graphql = GitHubGraphQL(http, github.graphql_url, lambda: config.secret(github.token_env), github.token_env,
                            clock=clock)
    return GitHubAdapter(github, graphql)


# The board family: a board's name (its `[boards.<name>]` table and its /webhooks/<name> route)
# and how its adapter is built. A new board is one module plus one line here; a `[boards.*]`
# table naming none of these fails at start-up.
BOARDS: dict[str, Callable[[Config, httpx.AsyncClient, Clock], BoardAdapter]] = {
    "github": _github,
    "linear": lambda config, http, clock: LinearAdapter(config.board("linear")),
    "jira": lambda config, http, clock: JiraAdapter(config.board("jira")),
    "trello": lambda config, http, clock: TrelloAdapter(config.board("trello")),
    "generic": lambda config, http, clock: GenericAdapter(config.board("generic")),
}


def build_adapters(config: Config, http: httpx.AsyncClient, clock: Clock = time.monotonic) -> dict[str, BoardAdapter]:
    """One adapter per board, keyed by board name; built once per app (the GitHub adapter's
    GraphQL cache lives as long as it does). `clock` drives that cache's TTL."""
    return {name: build(config, http, clock) for name, build in BOARDS.items()}
