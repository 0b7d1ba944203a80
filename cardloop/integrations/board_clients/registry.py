"""Which board client writes a card's board, built from config.toml and one environment
variable per board (`[boards.<board>] write_token_env`), or the sentence saying why none does.

    unavailable(config, board)   None when the board can be written to, else why not (one line:
                                 the stage's details and `cardloop doctor` print it)
    client_for(config, board)    the board's BoardClient (call unavailable first)
"""

from __future__ import annotations

from collections.abc import Callable

from cardloop.contracts.config import Config
from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.board_clients.base import BoardClient

# What each board's credential is, for the sentences that say it is missing.
CREDENTIAL = {"github": "a GitHub token (issues: write, projects: write)",
              "linear": "a Linear API key", "jira": "email:api-token of a Jira Cloud account",
              "trello": "Trello API key:token", "generic": "the outgoing webhook's signing secret"}


def unavailable(config: Config, board: str) -> str | None:
    if board not in CREDENTIAL:
        return f"board {board!r} is none of {', '.join(CREDENTIAL)}: cardloop has no client to write to it"
    cfg = config.board(board)
    if not cfg.write_token_env:
        return f"board writes are off for {board} (boards.{board}.write_token_env is empty)"
    if config.secret(cfg.write_token_env) is None:
        return f"{board}: not written to, {cfg.write_token_env} is not set ({CREDENTIAL[board]})"
    if board == "jira" and not cfg.api_url:
        return "jira: not written to, boards.jira.api_url is empty (your site, https://SITE.atlassian.net)"
    if board == "generic" and not cfg.api_url:
        return "generic: nothing is sent, boards.generic.api_url (the outgoing webhook's URL) is empty"
    secret = reveal(config.secret(cfg.write_token_env)) or ""
    if board in ("jira", "trello") and ":" not in secret:
        return f"{board}: not written to, {cfg.write_token_env} must be {CREDENTIAL[board]}"
    return None


def _github(config: Config, secret: Secret) -> BoardClient:
    from cardloop.integrations.board_clients.github import GitHubBoard
    cfg = config.board("github")
    return GitHubBoard(cfg.api_url or config.sources.github.api_url, cfg.graphql_url, secret,
                       status_field=cfg.status_field, project=cfg.project, timeout=config.sources.github.timeout,
                       login=cfg.write_actor)


def _linear(config: Config, secret: Secret) -> BoardClient:
    from cardloop.integrations.board_clients.linear import LinearBoard
    return LinearBoard(config.board("linear").api_url, secret)


def _jira(config: Config, secret: Secret) -> BoardClient:
    from cardloop.integrations.board_clients.jira import JiraBoard
    return JiraBoard(config.board("jira").api_url, secret)


def _trello(config: Config, secret: Secret) -> BoardClient:
    from cardloop.integrations.board_clients.trello import TrelloBoard
    return TrelloBoard(config.board("trello").api_url, secret)


def _generic(config: Config, secret: Secret) -> BoardClient:
    from cardloop.integrations.board_clients.generic import GenericBoard
    cfg = config.board("generic")
    return GenericBoard(cfg.api_url, secret, tenant=cfg.tenant, actor=cfg.write_actor)


# One line per board: its name and how its client is built (imported on first use).
CLIENTS: dict[str, Callable[[Config, Secret], BoardClient]] = {
    "github": _github, "linear": _linear, "jira": _jira, "trello": _trello, "generic": _generic,
}


def client_for(config: Config, board: str) -> BoardClient:
    why = unavailable(config, board)
    if why is not None:
        raise ValueError(why)
    secret = config.secret(config.board(board).write_token_env)
    assert secret is not None
    return CLIENTS[board](config, secret)
