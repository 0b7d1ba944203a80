"""The demo's stage line (`run_stage`) waits for the board to hear of a run's end only when that
end is still to come. A board the worker cannot write (the demo's) is dry-run and its end is
recorded in the task that records the run, so the ✓ line follows at once; the demo used to wait
five seconds more after every stage for a board change that had already happened (44 s for the
five stages, 15 s without it). A board written by an activity after the run is recorded (a real
Linear, on loopback) is still waited for, and its end is printed before the ✓ line."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from cardloop.app.demo import run_stage
from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board, Request, board_env, serving
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(120)

PLAN = ["Plan: cap the delay before the jitter.\n\n<promise>COMPLETE</promise>"]


def fresh_tenant() -> str:
    """A tenant of its own: the fake Linear serves one issue id, and other tests' closed cards of
    that id share this Temporal server; querying one of them waits for a worker of its queue."""
    return f"demo-{uuid.uuid4().hex[:8]}"


class Lines:
    """The demo's output lines, each with when it was printed."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def __call__(self, line: str) -> None:
        self.lines.append((time.monotonic(), line))

    def at(self, starts: str) -> tuple[int, float]:
        return next((i, t) for i, (t, line) in enumerate(self.lines) if line.startswith(starts))


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_dry_run_boards_end_is_not_waited_for_again(stack: Stack) -> None:
    stack.model.transcript["planning"] = PLAN
    # A GitHub Projects card with no token to write with: every board write is a dry run.
    ref = stack.cards.import_card(small_card("DEMO-DRY-1", board="github-projects", tenant=fresh_tenant()))
    out = Lines()
    await run_stage(stack.cards, ref, "planning", 60, out)
    end, end_at = out.at("  board: would comment: cardloop · planning (run 1) completed.")
    done, done_at = out.at("  ✓ planning: completed after 1 turn(s)")
    assert end < done
    # Same poll: no settle. The wait it replaced was 5 s; 2 s leaves room for a loaded machine.
    assert done_at - end_at < 2.0, out.lines


@pytest.fixture
def linear() -> Iterator[Board]:
    with serving("linear") as board:
        yield board


@pytest.fixture
def stack_overrides(linear: Board) -> dict[str, str]:
    return board_env("linear", linear)


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_real_boards_end_written_after_the_run_is_printed_before_its_line(stack: Stack,
                                                                                  linear: Board) -> None:
    stack.model.transcript["planning"] = PLAN
    ref = stack.cards.import_card(small_card(CARD_ID["linear"], board="linear", tenant=fresh_tenant()))
    # The end comment is held back until the run's end has been seen on the card (as on a loaded
    # machine, or a slow board): the demo must wait for it before its ✓ line, not take the end of
    # the run for the end of the stage. On the code before board_told it printed ✓ first.
    run_seen = threading.Event()

    def hold_the_end_comment(req: Request) -> None:
        if b"commentCreate" in req.raw and b"completed." in req.raw:
            run_seen.wait(20)

    linear.arrive = hold_the_end_comment

    async def release_once_the_run_is_recorded() -> None:
        while not ((s := await stack.cards.state(ref)) and s.history):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a few of the demo's polls see the run ended, the board not told
        run_seen.set()

    releasing = asyncio.ensure_future(release_once_the_run_is_recorded())
    out = Lines()
    state = await run_stage(stack.cards, ref, "planning", 60, out)
    await releasing
    done, _ = out.at("  ✓ planning: completed after 1 turn(s)")
    # The end's line comes before the ✓ line. (The start's line was replaced by the end's before
    # a poll could see it: the demo shows the board's latest writes, not each one.)
    said = [line for _, line in out.lines[:done] if line.startswith("  board: linear: ")]
    assert said[-1:] == ["  board: linear: commented on ENG-42: cardloop · planning (run 1) completed."], out.lines
    assert [c.splitlines()[0] for c in linear.comments] == [
        "cardloop · planning (run 1) started: the agent is working on this card.",
        "cardloop · planning (run 1) completed."]
    assert state.history[-1].outcome == "completed"
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
