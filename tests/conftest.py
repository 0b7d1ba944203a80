"""Shared fixtures: a real token counter, the bundled config and templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from prompts.tokens import TokenCounter

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CARD = ROOT / "examples" / "card.json"


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TokenCounter("cl100k_base")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Tests never read a developer's own overrides or config.
    for name in list(__import__("os").environ):
        if name.startswith("CARDLOOP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CARDLOOP_PATHS__PROMPT_OVERRIDES", str(tmp_path / "no-overrides"))
