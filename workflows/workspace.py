"""The stage's workspace, seen from the workflow: where it is, what its tool calls did, and
when the agent is stuck.

`Hands.open` asks any worker to make the card's worktree (names.WORKSPACE_OPEN on the shared
queue) and keeps the task queue of the worker that did. Tool calls, checkpoints and
verifications go to that queue. When that worker is gone, a call's schedule-to-start timeout
fires (nobody polls its queue) and the workspace is opened again on another worker, from the
card's last checkpoint on the remote branch; a note in the history tells the model that what
was not checkpointed is gone. Everything here is deterministic workflow code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError, TimeoutError, TimeoutType
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        AppendInput,
        CheckpointInput,
        CheckpointResult,
        LineComment,
        StageInput,
        ToolCallOut,
        ToolInput,
        ToolOutcome,
        VerifyInput,
        VerifyResult,
        WorkspaceInfo,
        WorkspaceInput,
    )
    from cardloop.workflows import policies, versions

# Tools whose calls may change the worktree: a turn that used one is checkpointed.
WRITING_TOOLS = frozenset({"write_file", "edit_file", "run_command"})
# Read-only: this module is shared by every workflow run in the worker (passed through the sandbox).
CONTROL_TOOLS = MappingProxyType({"finish": "COMPLETE", "block": "BLOCKED"})
MAX_REOPENS = 3
MAX_REVIEW_COMMENTS = 50  # a review's line comments carried in the workflow (each at most 2,000 characters)


@dataclass
class TurnActs:
    """What the tool calls of one model reply did."""

    control: str | None = None   # COMPLETE (finish) or BLOCKED (block), when such a call succeeded
    reason: str = ""
    wrote: bool = False          # a tool that may change the worktree ran
    calls: int = 0
    errors: int = 0


@dataclass
class StuckWatch:
    """The agent is stuck when the same call fails `repeats` times in a row, or when `turns`
    turns in a row leave the branch as it was (write stages only)."""

    repeats: int
    turns: int
    last_failure: str = ""
    failures_in_a_row: int = 0
    turns_without_change: int = 0
    tried: list[str] = field(default_factory=list)

    def call(self, call: ToolCallOut, outcome: ToolOutcome) -> None:
        signature = f"{call.name} {json.dumps(call.input, sort_keys=True, ensure_ascii=False)}"
        if not outcome.is_error:
            self.last_failure, self.failures_in_a_row = "", 0
            return
        if signature == self.last_failure:
            self.failures_in_a_row += 1
        else:
            self.last_failure, self.failures_in_a_row = signature, 1
            self.tried.append(f"{call.name} {brief(call.input)}: {outcome.excerpt[:160]}")

    def turn(self, changed: bool) -> None:
        self.turns_without_change = 0 if changed else self.turns_without_change + 1

    def verdict(self, write_stage: bool) -> str | None:
        if self.failures_in_a_row >= self.repeats:
            return (f"stuck: the same tool call failed {self.failures_in_a_row} times in a row "
                    f"({self.last_failure[:300]})")
        if write_stage and self.turns_without_change >= self.turns:
            tried = "; ".join(self.tried[-5:]) or "no failing tool calls"
            return f"stuck: {self.turns_without_change} turns without a change to the branch (tried: {tried})"
        return None


def brief(args: dict[str, Any]) -> str:
    for key in ("command", "path", "pattern"):
        value = args.get(key)
        if isinstance(value, str):
            return f"`{value[:80]}`"
    return ""


class Hands:
    def __init__(self, inp: StageInput, info: WorkspaceInfo) -> None:
        self.inp = inp
        self.info = info
        self.reopened = 0
        self.review_comments: list[LineComment] = []  # review_comment calls that succeeded, in order
        # A tool that may write was started since the last checkpoint (it may have written even
        # if it failed or was cancelled): a cancelled run commits it before it ends.
        self.unsaved = False
        self._note_due = False
        # The research tool, answered in the workflow (a child workflow), not on the workspace's worker.
        self.research: Callable[[ToolCallOut, int], Awaitable[ToolOutcome]] | None = None

    @classmethod
    async def open(cls, inp: StageInput) -> Hands | None:
        """None when the card names no repository (the stage's turns stay text)."""
        info = await cls._open(inp)
        return cls(inp, info) if info.queue else None

    @staticmethod
    async def _open(inp: StageInput, *, reopen: bool = False) -> WorkspaceInfo:
        return await workflow.execute_activity(
            names.WORKSPACE_OPEN, WorkspaceInput(card_key=inp.ref.key, stage=inp.stage, run=inp.run, reopen=reopen),
            result_type=WorkspaceInfo, **policies.WORKSPACE_OPEN, summary=f"{inp.stage}: open the workspace")

    @property
    def where(self) -> str:
        return f"branch {self.info.branch} ({self.info.created_from})"

    async def _on_worker(self, activity: str, arg: Any, result_type: type, summary: str, *,
                         stoppable: bool = False) -> Any:
        """`stoppable`: a call that runs a command; when the stage is cancelled the workflow waits
        until the worker has killed it, so nothing runs on in the worktree the run commits."""
        s = self.inp.settings
        waits = stoppable and versions.patched(versions.CHECKPOINT_ON_CANCEL)
        extra: dict[str, Any] = {}
        if waits:
            extra["cancellation_type"] = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        while True:
            try:
                result = await workflow.execute_activity(
                    activity, arg, result_type=result_type, summary=summary,
                    **policies.on_workspace(self.info.queue, s.affinity_timeout), **extra)
            except ActivityError as err:
                # A call that ended otherwise than cancelled while the cancel was awaited (it
                # finished first, or its worker was gone) has taken the task's cancel: honour it.
                if waits and workflow.cancellation_reason() is not None and not isinstance(err.cause, CancelledError):
                    raise asyncio.CancelledError("cancelled while a command ran") from None
                if not _worker_gone(err) or self.reopened >= MAX_REOPENS:
                    raise
                await self._reopen()
                continue
            if waits and workflow.cancellation_reason() is not None:
                raise asyncio.CancelledError("cancelled while a command ran")
            return result

    async def _reopen(self) -> None:
        lost = self.info.queue
        self.reopened += 1
        self.info = await self._open(self.inp, reopen=True)
        workflow.logger.warning("workspace worker %s is gone; reopened on %s", lost, self.info.queue)
        self._note_due = True

    async def _note_reopened(self) -> None:
        """Tell the model its workspace was made again. Only between turns: a note inside a turn's
        tool calls would separate a tool call from its result, which the providers refuse."""
        if not self._note_due:
            return
        self._note_due = False
        inp = self.inp
        await workflow.execute_activity(
            names.APPEND,
            AppendInput(card_key=inp.ref.key, role="user", author="cardloop", stage=inp.stage,
                        dedup_key=f"{workflow.info().workflow_id}/reopen-{self.reopened}",
                        text=(f"The worker that held the workspace was lost. The workspace was made again "
                              f"from {self.info.created_from} (commit {self.info.head[:12]}): changes made "
                              "after the last checkpoint are gone. Check the files before going on.")),
            result_type=int, **policies.STORE, summary=f"{inp.stage}: workspace reopened")

    async def run_tools(self, calls: list[ToolCallOut], iteration: int, watch: StuckWatch) -> TurnActs:
        """Every call of the reply, in order, each answered in the history (the providers want a
        result for every call); a refused or failed call is the model's information, not ours."""
        acts = TurnActs()
        wf = workflow.info().workflow_id
        for call in calls:
            outcome: ToolOutcome
            if call.name == names.RESEARCH_TOOL and self.research is not None \
                    and versions.patched(versions.RESEARCH_TOOL):
                outcome = await self.research(call, iteration)
            else:
                if call.name in WRITING_TOOLS:
                    self.unsaved = True
                outcome = await self._on_worker(
                    names.TOOL,
                    ToolInput(card_key=self.inp.ref.key, stage=self.inp.stage, call_id=call.id, name=call.name,
                              input=call.input, dedup_key=f"{wf}/tool-{iteration}-{call.id}",
                              tools=self.inp.settings.tools,
                              # Data only (replays alike): past the cap the tool refuses, in words.
                              review_full=call.name == "review_comment"
                              and len(self.review_comments) >= MAX_REVIEW_COMMENTS),
                    ToolOutcome, f"{self.inp.stage} turn {iteration}: {call.name} {brief(call.input)}".rstrip(),
                    stoppable=True)
            acts.calls += 1
            acts.errors += outcome.is_error
            watch.call(call, outcome)
            if outcome.is_error:
                continue
            if call.name in WRITING_TOOLS:
                acts.wrote = True
            if call.name == "review_comment" and len(self.review_comments) < MAX_REVIEW_COMMENTS:
                self.review_comments.append(LineComment(path=str(call.input["path"]), line=int(call.input["line"]),
                                                        body=str(call.input["body"])[:2_000]))
            if call.name in CONTROL_TOOLS and acts.control is None:
                acts.control = CONTROL_TOOLS[call.name]
                acts.reason = str(call.input.get("reason") or call.input.get("summary") or "")
        await self._note_reopened()
        return acts

    async def checkpoint(self, iteration: int) -> CheckpointResult:
        done = await self._on_worker(
            names.CHECKPOINT, CheckpointInput(card_key=self.inp.ref.key, run=self.inp.run, turn=iteration),
            CheckpointResult, f"{self.inp.stage} turn {iteration}: checkpoint (commit + push)")
        self.unsaved = False
        await self._note_reopened()
        return done

    async def verify(self, iteration: int) -> VerifyResult:
        done = await self._on_worker(
            names.VERIFY,
            VerifyInput(card_key=self.inp.ref.key, stage=self.inp.stage,
                        dedup_key=f"{workflow.info().workflow_id}/verify-{iteration}"),
            VerifyResult, f"{self.inp.stage} turn {iteration}: verify COMPLETE ({self.info.test_command or 'tests'})",
            stoppable=True)
        await self._note_reopened()
        return done


def _worker_gone(err: ActivityError) -> bool:
    """The activity never started (nobody polls the queue) or its worker stopped heartbeating."""
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type in (TimeoutType.SCHEDULE_TO_START, TimeoutType.HEARTBEAT)
