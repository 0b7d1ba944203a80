"""Names only the families' registries know fail at start-up, naming the key."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cardloop.app.startup import load_config
from cardloop.contracts.config import REPO_CONFIG
from cardloop.contracts.errors import ConfigError
from tests.conftest import BUNDLED_CONFIG


def test_the_bundled_config_names_only_known_sources_providers_and_boards() -> None:
    config = load_config(REPO_CONFIG, env={})
    assert config.context.sources


def test_unknown_source_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace('planning = ["repository"]', 'planning = ["repository", "jenkins"]'))
    with pytest.raises(ConfigError, match=r"context\.sources\.planning: unknown source 'jenkins' "
                                          r"\(expected one of: repository, github_actions"):
        load_config(path, env={})


def test_unknown_provider_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG + '\n[providers.mistral]\nformat = "openai"\n')
    with pytest.raises(ConfigError, match=r"providers\.mistral: unknown provider 'mistral'"):
        load_config(path, env={})


def test_unknown_board_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG + '\n[boards.asana]\ntenant = "default"\n')
    with pytest.raises(ConfigError, match=r"boards\.asana: unknown board 'asana' \(expected one of: github"):
        load_config(path, env={})


def test_the_cli_refuses_to_start_on_an_unknown_name(config_file: Callable[[str], Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from cardloop.app.cli.main import main

    path = config_file(BUNDLED_CONFIG.replace('planning = ["repository"]', 'planning = ["jenkins"]'))
    assert main(["--config", str(path), "config", "check"]) == 2
    assert "context.sources.planning: unknown source 'jenkins'" in capsys.readouterr().err


def test_the_boards_the_config_accepts_are_the_boards_with_an_adapter() -> None:
    from cardloop.app.boards.adapters import BOARDS
    from cardloop.contracts import names

    assert tuple(BOARDS) == names.BOARD_NAMES


def test_a_source_registered_at_run_time_is_accepted(config_file: Callable[[str], Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The name lists spare start-up the registries' import; a source a plugin (or a test)
    registers is not in them, and start-up refused it: the registry is asked for what they lack."""
    from cardloop.integrations.sources import registry

    path = config_file(BUNDLED_CONFIG.replace('planning = ["repository"]', 'planning = ["repository", "jenkins"]'))
    monkeypatch.setitem(registry.SOURCES, "jenkins", registry.SOURCES["repository"])
    assert "jenkins" in load_config(path, env={}).context.sources[next(
        s for s in load_config(path, env={}).context.sources if s.value == "planning")]
    monkeypatch.delitem(registry.SOURCES, "jenkins")
    with pytest.raises(ConfigError, match="unknown source 'jenkins'"):
        load_config(path, env={})


def test_the_sources_and_providers_the_config_accepts_are_the_registries() -> None:
    from cardloop.contracts import names
    from cardloop.integrations.providers.registry import PROVIDERS
    from cardloop.integrations.sources.registry import SOURCES

    assert tuple(SOURCES) == names.SOURCE_NAMES  # the order too: the error lists them in it
    assert tuple(PROVIDERS) == names.PROVIDER_NAMES


def test_loading_the_config_imports_neither_the_board_adapters_nor_the_registries() -> None:
    """Every CLI command loads the config; the adapters import their boards' clients (httpx, about
    50 ms), which only the commands that talk to boards need, and the sources' and providers'
    registries their base modules (about 10 ms). A fresh interpreter: this one may have imported
    them already."""
    code = ("import json, sys; from cardloop.app.startup import load_config; from cardloop.contracts.config import "
            "REPO_CONFIG; load_config(REPO_CONFIG, env={}); print(json.dumps(sorted(sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(run.stdout))
    assert "cardloop.contracts.config" in loaded  # the probe did load the config...
    assert not {"cardloop.app.boards.adapters", "cardloop.integrations.sources.registry",
                "cardloop.integrations.providers.registry"} & loaded  # ...without these
