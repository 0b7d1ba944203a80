"""The board adapter contract and the registry the webhook routes use.

A route does, for board `name`:

    adapter = adapters[name]                                  # unknown name: 404
    secrets = board_secrets(config, adapter)                  # none set: 503 (board not configured)
    tenant = verified_tenant(adapter, request.headers, raw_body, secrets, now)  # 401 / 503
    check_window(adapter.event_time(request.headers, raw_body), now, window, name)  # 400 / 401
    result = await adapter.parse(request.headers, raw_body)   # 400 / 502 / 503
    Ignored -> 2xx with result.reason; list[BoardEvent] -> each event's tenant claim must be the
    verified tenant (403), its dedup key is delivery_key(adapter.signed_content(raw_body), event),
    then apply each (an event whose stage is None names an unmapped column: acknowledged)

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

    def signed_content(self, body: bytes) -> bytes:
        """What the board signs, less what it changes between retries of one event: the dedup
        key is made of this, never of a header."""
        ...

    def event_time(self, headers: Mapping[str, str], body: bytes) -> float | None:
        """When the event happened, from the signed body (seconds since the epoch); None when
        the body carries no time. WebhookError(400) for a malformed time."""
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
