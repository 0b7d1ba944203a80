"""The CLI reaches a card moved to another team or project on its board by its new id too: `card
show` and `card say` under OPS-9 act on the card kept as ENG-5 (its first key), and show which id
the board gives it now; an id recorded in one tenant means nothing in another."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)


async def test_card_show_and_say_by_the_boards_new_id(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("ENG-5", board="linear", branch="card/ENG-5"))
    stack.store.remember_board_ids(ref.key, uid="2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9", name="OPS-9")
    shown = await cardloop(env, "card", "show", "acme/linear/OPS-9")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith("card acme/linear/ENG-5: Retry failed webhook deliveries"), shown.stdout
    assert "on linear now OPS-9 (the card keeps its first key; OPS-9 reach it too)" in shown.stdout
    as_json = await cardloop(env, "card", "show", "linear/OPS-9", "--tenant", "acme", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert (data["card"], data["board_ids"]) == (
        "acme/linear/ENG-5", {"uid": "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9", "names": ["OPS-9"]})
    said = await cardloop(env, "card", "say", "acme/linear/OPS-9", "Cap the delay at 30s.")
    assert said.returncode == 0 and "comment sent to card acme/linear/ENG-5" in said.stdout, said.stdout + said.stderr
    for _ in range(300):   # the card's workflow appends the comment to ENG-5's history
        if "Cap the delay at 30s." in [m.content for m in stack.store.messages(ref.key)]:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the comment never reached {ref.key}: {stack.store.messages(ref.key)}")
    for missing in ("acme/linear/OPS-10", "globex/linear/OPS-9", "acme/jira/OPS-9"):
        refused = await cardloop(env, "card", "show", missing)
        assert refused.returncode == 2 and "is not known to the store" in refused.stderr, (missing, refused.stderr)


async def test_card_show_of_a_card_named_back_to_its_first_id(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("ENG-6", board="linear", branch="card/ENG-6"))
    stack.store.remember_board_ids(ref.key, name="OPS-9")
    stack.store.remember_board_ids(ref.key, name="ENG-6")   # moved back to its first team
    shown = await cardloop(env, "card", "show", "acme/linear/OPS-9")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith("card acme/linear/ENG-6: "), shown.stdout
    assert "on linear ENG-6 again (OPS-9 reach it too)" in shown.stdout, shown.stdout
    assert "now" not in shown.stdout.splitlines()[1], shown.stdout
