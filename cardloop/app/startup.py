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
    # A name the lists do not hold may still be registered (a source or provider added at run
    # time, as a plugin or a test does): only then is the registry imported and asked.
    used = [(stage, name) for stage, names in config.context.sources.items() for name in names]
    sources = SOURCE_NAMES if all(name in SOURCE_NAMES for _, name in used) else _registered_sources()
    problems = [unknown(f"context.sources.{stage.value}", "source", name, sources)
                for stage, name in used if name not in sources]
    providers = PROVIDER_NAMES if all(name in PROVIDER_NAMES for name in config.providers) \
        else _registered_providers()
    problems += [unknown(f"providers.{name}", "provider", name, providers)
                 for name in config.providers if name not in providers]
    problems += [unknown(f"boards.{name}", "board", name, BOARD_NAMES) for name in config.boards
                 if name not in BOARD_NAMES]
    return problems


def _registered_sources() -> tuple[str, ...]:
    from cardloop.integrations.sources.registry import SOURCES

    return tuple(SOURCES)


def _registered_providers() -> tuple[str, ...]:
    from cardloop.integrations.providers.registry import PROVIDERS

    return tuple(PROVIDERS)


def startup_check(config: Config, assembler: PromptAssembler) -> None:
    """Checks that need the templates too: fail at start-up, never mid-card."""
    from cardloop.prompts.templates import TemplateError

    problems = []
    for name in assembler.templates.names():  # an override that cannot be read fails here, not mid-card
        try:
            assembler.templates.load(name)
        except TemplateError as exc:
            problems.append(f"paths.prompt_overrides: {exc}")
    for stage in Stage:
        for p in assembler.check(config.assembly_settings(stage)):
            problems.append(f"stages.{stage.value}.budget: {p}")
    if problems:
        raise ConfigError(f"{config.source}: invalid configuration:\n"
                          + "\n".join(f"  {p}" for p in dict.fromkeys(problems)))
