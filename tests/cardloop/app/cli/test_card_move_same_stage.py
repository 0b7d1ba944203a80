"""A move to the stage a card is already running (a board's echo, a second click, a script)
leaves that run alone: it is not cancelled and started again. `card move --wait` then follows
the run that goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
@pytest.mark.model_timeout(20)  # the answer is held 10 s (below)
async def test_a_move_to_the_running_stage_does_not_cancel_it(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    # Planning's only turn is still waiting for the model when the CLI's move arrives: the CLI
    # process takes a second or two to start, several on a loaded machine (4 s was once too few).
    stack.model.inject(delay=10.0)
    ref = stack.cards.import_card(small_card("SAME-1"))
    await stack.cards.move(ref, "planning", delivery_id="p-1")
    await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning")
    out = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "following planning run 1 until it ends" in out.stdout
    assert out.stdout.splitlines()[-1].startswith("  ✓ planning run 1: completed after 1 turn(s)")
    state = await stack.cards.state(ref)
    assert state is not None and [(r.stage, r.outcome) for r in state.history] == [("planning", "completed")]
    assert state.stage_runs == 1 and stack.model.request_count == 1
    # Once it has ended, a move to the same stage is a new run, as before.
    again = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--wait")
    assert again.returncode == 0 and "  ✓ planning run 2: completed" in again.stdout
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "same-stage-move")
