"""The board lane: a card's board writes (the run's opening comment, its outcome and the move to
the next column) run in order by one task beside the card's loop, so a slow board never holds
up the next stage and nothing written is dropped when the run closes (versions.BOARD_LANE)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts.payloads import CardStart, CardState, StageRun
    from cardloop.workflows import board, versions
    from cardloop.workflows.card_view import CardView
    from cardloop.workflows.local_gate import LocalGate


class CardBoardLane(CardView):
    def _on_lane(self, write: Callable[[], Awaitable[None]]) -> None:
        self._lane_used = True
        self._lane.append(write)
        if not self._lane_busy:
            self._lane_busy = True
            self._lane_task = asyncio.ensure_future(self._drain_lane())

    async def _drain_lane(self) -> None:
        try:
            while self._lane:
                await self._lane.pop(0)()
        finally:
            self._lane_busy = False

    async def _lane_idle(self) -> None:
        """Before the run closes or continues as new: nothing written to the board is dropped."""
        if self._lane_busy:
            await workflow.wait_condition(lambda: not self._lane_busy)

    def _lane_gate(self) -> LocalGate | None:
        return self._gate if versions.decided(versions.LOCAL_ACTIVITIES_ALONE) else None

    async def _open_on_board(self, stage: str, run: int, was_blocked: bool) -> None:
        on_board, self.state.board, dry_run = await board.opening(self.card_key, stage, run, was_blocked,
                                                                  self._lane_gate())
        self._opened[run] = (on_board, dry_run)
        self._details()

    async def _end_on_board(self, start: CardStart, result: StageRun, state: CardState, next_stage: str) -> None:
        on_board, dry_run = self._opened.pop(result.run, (False, False))
        if on_board and result.outcome != "cancelled":
            local = dry_run and versions.patched(versions.BOARD_DRY_RUN_LOCAL)
            writes = await board.ended(self.card_key, state, result, next_stage, local=local, gate=self._lane_gate())
            said = writes[0]
            if start.ref.board == "github" and said.target:
                history = self.state.history
                for i, recorded in enumerate(history):
                    if recorded.run == result.run:
                        history[i] = recorded.model_copy(update={"comment": said.target})
            self.state.board = "; ".join(w.line() for w in writes)
            self._details()
        self.state.board_told = max(self.state.board_told, result.run)

    async def _board_ended(self, start: CardStart, result: StageRun, *, dry_run: bool = False) -> None:
        """The run's outcome on the board, then the card to its next column (or blocked)."""
        auto = next((t for t in self.pending if t.delivery_id == f"auto/{result.run}"), None)
        local = dry_run and versions.patched(versions.BOARD_DRY_RUN_LOCAL)
        writes = await board.ended(self.card_key, self.state, result, auto.to if auto else "", local=local)
        said, last = writes[0], self.state.history[-1] if self.state.history else None
        if start.ref.board == "github" and said.target and last is not None and last.run == result.run:
            self.state.history[-1] = last.model_copy(update={"comment": said.target})
        self.state.board = "; ".join(w.line() for w in writes)
        self._details()
