"""`cardloop card list` shows the id a card's board gives it now when that is not the id its key
was made of (an issue moved to another team, project or repository), in the table and in --json,
as `card show` does; a card never renamed, or named back to its first id, shows none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(120)


async def test_card_list_shows_the_boards_current_id_beside_the_first_key(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    transferred = stack.cards.import_card(small_card("octo-org/octo-repo#1", title="Spelling error in the README"))
    moved = stack.cards.import_card(small_card("ENG-5", board="linear", title="Retry payouts"))
    back = stack.cards.import_card(small_card("ENG-6", board="linear", title="Named back"))
    plain = stack.cards.import_card(small_card("ENG-7", board="linear", title="Never moved"))
    # As the webhook records them (boards/identity.py): names in the key's card id encoding.
    stack.store.remember_board_ids(transferred.key, uid="I_kwDOM0_enM6qMbTe", name="Codertocat:Hello-World#1")
    stack.store.remember_board_ids(moved.key, uid="2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9", name="OPS-9")
    stack.store.remember_board_ids(moved.key, name="OPS-10")
    stack.store.remember_board_ids(back.key, name="OPS-11")
    stack.store.remember_board_ids(back.key, name="ENG-6")

    listed = await cardloop(env, "card", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = {c["card"]: c["board_id"] for c in json.loads(listed.stdout)["cards"]}
    assert ids == {transferred.key: "Codertocat/Hello-World#1", moved.key: "OPS-10", back.key: None,
                   plain.key: None}

    table = await cardloop(env, "card", "list", "--board", "linear")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:-1]}
    assert rows[moved.key].endswith("[now OPS-10] Retry payouts"), rows
    assert rows[back.key].endswith("  Named back") and "[now" not in rows[back.key]
    assert rows[plain.key].endswith("  Never moved") and "[now" not in rows[plain.key]
    github = await cardloop(env, "card", "list", "--board", "github", "--tenant", "acme")
    assert "[now Codertocat/Hello-World#1] Spelling error in the README" in github.stdout, github.stdout
    # `card show` says the same of it.
    shown = await cardloop(env, "card", "show", transferred.key)
    assert "on github now Codertocat/Hello-World#1" in shown.stdout, shown.stdout
