"""What `config show` and `config check` say about the environment: the store actually used,
every secret the service reads (by variable name, set or unset, never its value) and the keys
a stage will miss. The list of secrets follows the config's `*_env` keys and the variables the
code reads directly (admin token, webhook secrets, DATABASE_URL), so a new one is added here."""

from __future__ import annotations

from typing import Any

from cardloop.contracts.config import Config
from cardloop.prompts.stages import STAGE_NAMES

ADMIN_TOKEN_ENV = "CARDLOOP_ADMIN_TOKEN"  # cardloop.app.api.auth reads it; not imported (FastAPI)
DATABASE_URL_ENV = "DATABASE_URL"


def _webhook_secret_envs() -> dict[str, str]:
    """Board name -> the variable holding its webhook secret (the adapters' own constant)."""
    from cardloop.app.boards.generic import GenericAdapter
    from cardloop.app.boards.github import GitHubAdapter
    from cardloop.app.boards.jira import JiraAdapter
    from cardloop.app.boards.linear import LinearAdapter
    from cardloop.app.boards.trello import TrelloAdapter

    adapters = (GitHubAdapter, LinearAdapter, JiraAdapter, TrelloAdapter, GenericAdapter)
    return {a.name: a.secret_env for a in adapters}


def secret_uses(config: Config) -> dict[str, list[str]]:
    """Environment variable -> what reads it (config keys or routes), in config order."""
    uses: dict[str, list[str]] = {}

    def add(env_name: str, use: str) -> None:
        if env_name:
            uses.setdefault(env_name, []).append(use)

    for name, prof in config.profiles.items():
        add(prof.api_key_env, f"profiles.{name}.api_key_env")
    add(config.temporal.api_key_env, "temporal.api_key_env")
    add(config.temporal.codec_keys_env, "temporal.codec_keys_env")
    add(config.codec_server.token_env, "codec_server.token_env")
    add(ADMIN_TOKEN_ENV, "the API's admin routes (tenant tokens)")
    add(DATABASE_URL_ENV, "the store (overrides store.url)")
    github = config.sources.github
    add(github.token_env, "sources.github.token_env")
    add(github.app_private_key_env, "sources.github.app_private_key_env")
    add(config.sources.repository.token_env, "sources.repository.token_env")
    for tenant, cfg in (config.tenants or {}).items():
        add(cfg.github_token_env, f"tenants.{tenant}.github_token_env")
    for board, env_name in _webhook_secret_envs().items():
        add(env_name, f"webhooks from {board}")
        cfg = config.board(board)
        for tenant, tenant_env in cfg.secrets.items():
            add(tenant_env, f"boards.{board}.secrets.{tenant}")
        add(cfg.write_token_env, f"boards.{board}.write_token_env")
    add(config.board("github").token_env, "boards.github.token_env")
    return uses


def secrets_view(config: Config) -> dict[str, dict[str, Any]]:
    return {env_name: {"status": "set" if config.env.get(env_name) else "unset", "used_by": used}
            for env_name, used in secret_uses(config).items()}


def masked_url(url: str) -> str:
    """The URL without its password (user name, host and database stay: they say which store)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return "(not a database URL)"
    from cardloop.store.engine import mask

    return mask(parsed)


def store_view(config: Config) -> dict[str, Any]:
    url = config.store_url()
    backend = url.split(":", 1)[0].split("+", 1)[0] or "unknown"
    source = DATABASE_URL_ENV if config.env.get(DATABASE_URL_ENV) else "store.url"
    return {"backend": "postgresql" if backend in ("postgres", "postgresql") else backend,
            "url": masked_url(url), "from": source}


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def missing_key_warnings(config: Config) -> list[str]:
    """One warning per unset model key that a stage, the summarizer or the gateway needs."""
    users: dict[str, dict[str, list[str]]] = {}  # env -> profile -> what uses it
    uses = [(stage, config.stages[stage].profile) for stage in STAGE_NAMES if stage in config.stages]
    uses += [("the summarizer", config.summarizer.profile), ("the prompt gateway", config.gateway.profile)]
    for what, profile in uses:
        prof = config.profiles[profile]
        if prof.provider == "openai":  # OpenAI-compatible servers (vLLM, Ollama) may need no key
            continue
        users.setdefault(prof.api_key_env, {}).setdefault(profile, []).append(what)
    warnings = []
    for env_name, by_profile in users.items():
        if not env_name or config.env.get(env_name):
            continue
        parts = []
        for profile, used in by_profile.items():
            stages = [u for u in used if u in STAGE_NAMES]
            others = [u for u in used if u not in STAGE_NAMES]
            named = ([f"stage{'s' if len(stages) > 1 else ''} {', '.join(stages)}"] if stages else []) + others
            parts.append(f"{_join(named)} (profile {profile})")
        warnings.append(f"{env_name} is not set: {'; '.join(parts)} cannot call the model until it is "
                        "(without a key, `cardloop demo` and `cardloop dev --scripted` use the offline "
                        "scripted model)")
    return warnings
