"""config.toml as an entry point loads it: the contracts' checks (keys, budgets, stages,
profiles), then the names only the families' registries know. An unknown source in
`[context.sources]`, or a `[providers.*]` or `[boards.*]` table that names no provider or
board, fails at start-up with a ConfigError naming the key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cardloop.contracts import config as contracts
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.names import BOARD_NAMES
from cardloop.integrations.providers.registry import PROVIDERS
from cardloop.integrations.sources.registry import SOURCES
from cardloop.prompts.stages import Stage

if TYPE_CHECKING:
    from cardloop.prompts.assemble import PromptAssembler


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    config = contracts.load_config(path, env)
    problems = unknown_names(config)
    if problems:
        raise ConfigError(f"{config.source}: invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))
    return config


def unknown_names(config: Config) -> list[str]:
    def unknown(key: str, what: str, name: str, known: Iterable[str]) -> str:
        return f"{key}: unknown {what} {name!r} (expected one of: {', '.join(known)})"

    problems = [unknown(f"context.sources.{stage.value}", "source", name, SOURCES)
                for stage, names in config.context.sources.items() for name in names if name not in SOURCES]
    problems += [unknown(f"providers.{name}", "provider", name, PROVIDERS)
                 for name in config.providers if name not in PROVIDERS]
    # Named without importing the adapters, which import their boards' clients.
    problems += [unknown(f"boards.{name}", "board", name, BOARD_NAMES) for name in config.boards
                 if name not in BOARD_NAMES]
    return problems


def startup_check(config: Config, assembler: PromptAssembler) -> None:
    """Checks that need the templates too: fail at start-up, never mid-card."""
    problems = []
    for stage in Stage:
        for p in assembler.check(config.assembly_settings(stage)):
            problems.append(f"stages.{stage.value}.budget: {p}")
    if problems:
        raise ConfigError(f"{config.source}: invalid configuration:\n"
                          + "\n".join(f"  {p}" for p in dict.fromkeys(problems)))
