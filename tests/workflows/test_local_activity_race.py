"""A query that meets the card's local activity while a board write ends: the run still replays.

The live race (workflows/local_gate.py): a stage run ends while the board lane's started comment
is still in flight; the card's loop runs its stage-settings local activity; a query answered in
that workflow task makes Temporal's core close the task early, and the comment's completion
comes in the next task *before* the local activity's result. Before the gate, the lane then
scheduled its next board write ahead of the loop's upsert, and the history failed to replay
(4 cards of 4 with a slower query; 3 runs of this test in 4). The test makes each piece of the
race likely instead of lucky: the state query takes a while to answer between two stage runs (so
a query attached to that task is still being answered when the local activity ends), and the
generic board holds each started comment until the stage run before it has ended, then lets it
finish inside that window. It counts the races it produced (a cut at the settings marker, a
board write ending in the new task, which schedules the lane's next one) and skips, saying so,
when no card met one (a loaded machine shifts the timing)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowHistory

from cardloop.contracts import names
from cardloop.contracts.payloads import CardState
from cardloop.workflows.card import CardWorkflow
from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board, board_env, serving
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(420)

QUERY_SECONDS = 0.4  # how long the state query holds its workflow task
RELEASE_AFTER = 0.1  # a held comment ends this long after the stage run before it ended
HOLD_AT_MOST = 3.0  # a comment that arrived after its stage run ended waits no longer
CARDS = 5  # at most, until one met the race (about two cards in three do on an idle machine, ~13 s each)
BUDGET_SECONDS = 60  # no further card after this

E = EventType


@pytest.fixture
def slow_state_query(monkeypatch: pytest.MonkeyPatch) -> None:
    definition = workflow._Definition.must_from_class(CardWorkflow)
    query = definition.queries[names.QUERY_STATE]
    answer = query.fn

    def slowly(self: CardWorkflow) -> CardState:
        if self.state.status == "idle" and self.state.history:  # between two stage runs: the window
            time.sleep(QUERY_SECONDS)  # in the worker's workflow thread: the task stays open meanwhile
        return answer(self)
    monkeypatch.setitem(definition.queries, names.QUERY_STATE, dataclasses.replace(query, fn=slowly))


@pytest.fixture(scope="module")
def board() -> Iterator[Board]:
    with serving("generic") as generic:
        yield generic


@pytest.fixture
def held(board: Board) -> Iterator[list[threading.Event]]:
    """Started comments wait here until the test lets them through (or HOLD_AT_MOST)."""
    waiting: list[threading.Event] = []

    def arrive(req) -> None:
        if b'"started"' in req.raw or b"started:" in req.raw:
            gate = threading.Event()
            waiting.append(gate)
            gate.wait(HOLD_AT_MOST)
    board.arrive = arrive
    try:
        yield waiting
    finally:
        board.arrive = None
        for gate in waiting:
            gate.set()


@pytest.fixture
def stack_overrides(board: Board) -> dict[str, str]:
    return {"CARDLOOP_STAGES__REVIEW__AUTO_ADVANCE": "true", **board_env("generic", board)}


def races(history: WorkflowHistory) -> int:
    """Tasks cut right after the stage settings' marker whose next task brought a board write's
    end and scheduled the lane's next write: the race that did not replay."""
    events, found = history.events, 0
    for i, event in enumerate(events):
        if event.event_type != E.EVENT_TYPE_MARKER_RECORDED or b"config.stage" not in event.SerializeToString():
            continue
        kinds = [e.event_type for e in events[i + 1:]]
        cut = kinds[:1] == [E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED] or E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in kinds[:3]
        if not cut:
            continue  # the task went on after the marker
        task = kinds.index(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)  # the new task, which the cut opened
        came = kinds[:task]
        made = [*kinds[task + 1:], E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED]
        made = made[:made.index(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)]
        if E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in came and E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED in made:
            found += 1
    return found


async def _query(handle: WorkflowHandle, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await handle.query(names.QUERY_STATE, result_type=CardState)
        except Exception:  # "query buffer is full": only pressure, ask again
            await asyncio.sleep(0.05)


async def _release(handle: WorkflowHandle, stop: asyncio.Event, held: list[threading.Event]) -> None:
    """Let the held started comments through shortly after each stage run ends."""
    ended = 0
    while not stop.is_set():
        history = await handle.fetch_history()
        now = sum(e.event_type == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED for e in history.events)
        if now > ended:
            ended = now
            await asyncio.sleep(RELEASE_AFTER)
            while held:
                held.pop().set()
        await asyncio.sleep(0.02)


async def test_a_board_write_ending_with_a_cut_local_activity_replays(
        stack: Stack, slow_state_query: None, held: list[threading.Event]) -> None:
    made, began = 0, time.monotonic()
    for n in range(CARDS):
        if n and time.monotonic() - began > BUDGET_SECONDS:
            break
        ref = stack.cards.import_card(small_card(f"{CARD_ID['generic']}-{n}", board="generic"))
        handle = await stack.cards.move(ref, "planning", delivery_id=f"race-{n}")
        stop = asyncio.Event()
        helpers = [asyncio.ensure_future(_query(handle, stop)), asyncio.ensure_future(_query(handle, stop)),
                   asyncio.ensure_future(_release(handle, stop, held))]
        try:
            state = await stack.wait_state(ref, lambda s: s.status == "done" and s.board_told >= s.stage_runs,
                                           timeout=150)
        finally:
            stop.set()
            await asyncio.gather(*helpers)
        assert [r.outcome for r in state.history] == ["completed"] * 4
        await replay_all(stack.client, handle)
        made += races(await handle.fetch_history())
        if made:
            break
    if not made:
        # Every card replayed, but none met the race (a loaded machine shifts its timing: about
        # two cards in three meet it on an idle one): say so rather than pass as if tested.
        pytest.skip(f"no card of {n + 1} met the race in {time.monotonic() - began:.0f} s; each replayed")

