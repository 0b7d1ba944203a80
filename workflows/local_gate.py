"""One local activity at a time in a card workflow, and nothing scheduled beside it.

A query that reaches a workflow while one of its local activities has just finished makes
Temporal's core close the workflow task with the activity's marker and hand the result to the
workflow in a new task; core puts that result *after* whatever else the new task brings (an
activity's completion, a signal), so the code woken by those runs first. On replay the result
comes in the first task, alone, and the code after the local activity runs first. A card runs
two coroutines (its loop and the board lane) and signal handlers: when one of them scheduled
something in that window, the run no longer replayed (measured: a lane's board comment
scheduled before the loop's upsert; tests/workflows/test_local_activity_race.py builds it).

So, on runs with versions.LOCAL_ACTIVITIES_ALONE: a coroutine schedules an activity, starts a
local activity or upserts only while no other coroutine is inside a local activity (`turn`),
and a local activity runs only through `local`, which holds the gate for its whole wait. Then
whatever the new task wakes waits for the code after the local activity, in the live run and on
replay alike. Every wait here is a `wait_condition` only when another holder exists: a run
that never overlaps does exactly what it did before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import workflow

T = TypeVar("T")


class LocalGate:
    def __init__(self) -> None:
        # Who is inside a local activity now ("loop", "lane"), or None.
        self.holder: str | None = None

    def busy_for(self, who: str) -> bool:
        return self.holder is not None and self.holder != who

    async def turn(self, who: str) -> None:
        """Before `who` schedules anything: wait while another coroutine is inside a local
        activity (a loop: two waiters released together find the gate taken again)."""
        while self.busy_for(who):
            await workflow.wait_condition(lambda: not self.busy_for(who))

    async def local(self, who: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call()` (a local activity) once nobody else holds the gate, holding it meanwhile."""
        await self.turn(who)
        self.holder = who
        try:
            return await call()
        finally:
            self.holder = None
