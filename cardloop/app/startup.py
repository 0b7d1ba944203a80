"""config.toml as an entry point loads it: the contracts' checks (keys, budgets, stages,
profiles), then the names of the families' registries (contracts/names.py lists them, so the
registries themselves are not imported at start-up). An unknown source in
`[context.sources]`, or a `[providers.*]` or `[boards.*]` table that names no provider or
board, fails at start-up with a ConfigError naming the key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cardloop.contracts import config as contracts
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.names import BOARD_NAMES, PROVIDER_NAMES, SOURCE_NAMES
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

    # Named without importing the registries (names.py says why; tests hold the lists to them).
    problems = [unknown(f"context.sources.{stage.value}", "source", name, SOURCE_NAMES)
                for stage, names in config.context.sources.items() for name in names if name not in SOURCE_NAMES]
    problems += [unknown(f"providers.{name}", "provider", name, PROVIDER_NAMES)
                 for name in config.providers if name not in PROVIDER_NAMES]
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
