"""What a new user reaches for first (issue 12, "Missing, that users expect"): --version, help text
on every option, the configured ports in `dev --help`. --version from the installed script, the
help texts in this process (inproc.py says why)."""

from __future__ import annotations

import argparse
import os
import subprocess
import tomllib

from tests.cardloop.app.cli.inproc import run_cli
from tests.cardloop.app.cli.procs import CLI
from tests.conftest import ROOT


def clean_env(env: dict[str, str] | None) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_")}, **(env or {})}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env=clean_env(env))


def run_script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, cwd=ROOT, env=clean_env(env),
                          timeout=60)


def test_version_prints_the_installed_version() -> None:
    out = run_script("--version")  # the version the installed package's metadata holds
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"cardloop {version} (Python ")


def _undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            for name, child in action.choices.items():
                if name not in helped:
                    missing.append(f"{path} {name}")
                missing += _undocumented(child, f"{path} {name}")
        elif not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_command_option_and_argument_has_help_text() -> None:
    from cardloop.app.cli.main import build_parser

    assert _undocumented(build_parser(), "cardloop") == []
    out = run("card", "move", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())  # argparse wraps to the terminal's width
    for needle in ("--to", "done ends the card", "--actor", "who moved the card"):
        assert needle in text, needle


def test_dev_help_shows_the_configured_ports_and_data_dir(tmp_path) -> None:
    out = run("dev", "--help", env={"CARDLOOP_DEV__UI_PORT": "18233", "CARDLOOP_API_PORT": "18001",
                                    "CARDLOOP_DEV__DATA_DIR": str(tmp_path / "data")})
    assert out.returncode == 0, out.stderr
    assert "--scripted" in out.stdout
    for needle in ("127.0.0.1:7233", "http://127.0.0.1:18233", "http://127.0.0.1:18001", str(tmp_path / "data"),
                   "cardloop.log", "temporal.log"):
        assert needle in out.stdout, needle
    broken = run("dev", "--help", env={"CARDLOOP_DEV__UI_PORT": "x"})
    assert broken.returncode == 0 and "configuration does not load" in broken.stdout
    assert "dev.ui_port (from CARDLOOP_DEV__UI_PORT)" in broken.stdout


def test_card_show_cuts_long_reasons_and_messages_between_words() -> None:
    from cardloop.app.cli.service import shorten

    reason = "the model is overloaded (529) after 8 attempts over 2 minutes; the stage's work is pushed"
    short = shorten(reason, 40)
    assert len(short) <= 40 and short.endswith("…")
    assert reason.startswith(short[:-1]) and reason[len(short) - 1] == " "  # cut where a word ended
    assert shorten("short\n  and   spaced", 40) == "short and spaced"
    word = "x" * 100  # no word boundary: the line is still bounded
    assert shorten(word, 20) == "x" * 19 + "…"
    assert shorten(reason, len(reason)) == reason
