"""A `card cancel` that meets its stage run ending on its own still stops the card.

Found by a tester sweeping cancels across the moment a stage's model call answers: about one card
in ten got its cancel answered with the run "completed" (it ended before the cancel reached it),
and then auto-advanced through every later stage, spending, although the user (or the board,
archiving the card: the same update) had asked that it stop. Since versions.STOP_HOLDS_THE_CARD
such a card waits for its next move, as a cancelled one does.

The sweep here does what the tester did, on the real stack: cards whose planning call takes
LATENCY seconds, each cancelled at its own moment around the answer. Every cancel is answered one
of two ways, and each way has its rule: a run (cancelled, or one that had ended on its own) and
the card stays on planning, idle, nothing else run; or "nothing to cancel" (the run was recorded
first) and the card may have moved on, as auto-advance moves it."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from cardloop.contracts.errors import RejectedError
from cardloop.contracts.payloads import CardRef, CardState, StageRun
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(240)

LATENCY = 1.0
# A planning run ends about 0.1-0.4 s after its model call answers (LATENCY after the move, on
# an idle machine): the cancels sweep from before the answer to well after the run's end.
OFFSETS = [LATENCY - 0.05 + 0.025 * k for k in range(27)]
LANES = 3  # cards at a time: more would queue their model calls behind the worker's slots


@pytest.mark.stack_env(CARDLOOP_STAGES__CODING__AUTO_ADVANCE="false")
async def test_a_cancel_meeting_the_stage_end_still_stops_the_card(stack: Stack) -> None:
    stack.model.latency = LATENCY

    async def one(k: int, offset: float) -> tuple[CardRef, str, StageRun | None]:
        ref = stack.cards.import_card(small_card(f"HOLD-{k}"))
        await stack.cards.move(ref, "planning", delivery_id=f"p-{k}")
        await asyncio.sleep(offset)
        try:
            run = await stack.cards.cancel(ref, actor="priya")
        except RejectedError as err:
            assert "nothing to cancel" in str(err), err
            return ref, "refused", None
        return ref, run.outcome, run  # planning's run, or coding's when the card had moved on first

    async def lane(first: int) -> list[tuple[CardRef, str, StageRun | None]]:
        return [await one(k, OFFSETS[k]) for k in range(first, len(OFFSETS), LANES)]

    answers = [answer for done in await asyncio.gather(*(lane(j) for j in range(LANES))) for answer in done]

    def settled(s: CardState) -> bool:
        return s.status != "running" and not s.auto_retry

    stack.model.latency = 0.0
    for ref, _, _ in answers:
        await stack.wait_state(ref, settled, timeout=90)
    await asyncio.sleep(1.5)  # a card wrongly moving on would be running its next stage by now
    seen: Counter[str] = Counter()
    for ref, answer, run in answers:
        seen[answer] += 1
        state = await stack.wait_state(ref, settled, timeout=90)
        if run is None:
            continue  # recorded before the cancel came: it moved on by itself, as it should
        assert (state.stage, state.status, state.stage_runs) == (run.stage, "idle", run.run), (
            f"{ref.card_id}: the cancel answered {run.stage} run {run.run} {answer}, yet the card went on: "
            f"{[(r.stage, r.outcome) for r in state.history]}")
        last = state.history[-1]  # the board lane may add its comment's id to the record later
        assert (last.stage, last.run, last.outcome) == (run.stage, run.run, run.outcome)
    assert seen["cancelled"] >= 1, seen  # the sweep starts before the answer: some were cut
    for ref, answer, _ in answers:
        if answer not in ("cancelled", "refused"):  # the race this test is about, when it was met
            await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "cancel-holds")
