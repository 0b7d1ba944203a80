"""A card archived or deleted on its board: `card show` (text and --json) and `card list` say so
until the card's next move, which clears the mark (the webhook side: test_webhook_archive.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)


async def test_show_and_list_say_a_card_is_gone_until_it_moves_again(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("GONE-1"))
    assert stack.store.set_gone(ref.key, "archived on trello by Priya Raman")

    shown = await cardloop(env, "card", "show", ref.key)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    line = shown.stdout.splitlines()[1]
    assert line.startswith("  archived on trello by Priya Raman at ") and "a move runs it again" in line, shown.stdout
    doc = json.loads((await cardloop(env, "card", "show", ref.key, "--json")).stdout)
    assert doc["gone"]["note"] == "archived on trello by Priya Raman" and doc["gone"]["at"]
    listed = await cardloop(env, "card", "list")
    assert f"[archived] {small_card('GONE-1').title}" in listed.stdout, listed.stdout
    assert json.loads((await cardloop(env, "card", "list", "--json")).stdout)["cards"][0]["gone"] \
        == "archived on trello by Priya Raman"

    moved = await cardloop(env, "card", "move", ref.key, "--to", "done")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    again = await cardloop(env, "card", "show", ref.key, "--json")
    assert json.loads(again.stdout)["gone"] is None
