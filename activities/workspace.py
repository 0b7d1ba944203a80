"""The coding agent's hands: workspace.open, workspace.tool, workspace.checkpoint, workspace.verify.

`open` runs on the shared task queue: whichever worker takes it makes (or reopens) the card's
git worktree on its disk and answers with its own task queue. The other three run on that
queue only (Temporal's worker-affinity pattern), so a tool call always finds the worktree it
acts on. When that worker dies, its queue has no poller: the workflow's schedule-to-start
timeout fires and it opens the workspace again on another worker, from the card's last
checkpoint on the remote branch.

Each has the rule of activities/once.py. A tool call's result is looked up in the history by
its key before the tool runs and recorded under that key after, so a retried call returns the
recorded result instead of running a command twice; a checkpoint commits only what changed and
pushes only what is unpushed; a verification is recorded once per claim of COMPLETE.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import stored_card
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.activities.once import exactly_once
from cardloop.contracts import names
from cardloop.contracts.payloads import (
    CardState,
    CheckpointInput,
    CheckpointResult,
    ToolInput,
    ToolOutcome,
    VerifyInput,
    VerifyResult,
    WorkspaceInfo,
    WorkspaceInput,
)
from cardloop.integrations.upstream import UpstreamError
from cardloop.integrations.workspace import (
    TOOLS,
    PushRejected,
    Toolbox,
    ToolContext,
    ToolResult,
    Workspace,
    WorkspaceError,
    WorkspaceManager,
    repository_test_command,
    run_tests,
)
from cardloop.integrations.workspace.manager import Checkpoint, sweep
from cardloop.integrations.workspace.tools import spec
from cardloop.integrations.workspace.tools.base import excerpt
from cardloop.integrations.workspace.tools.review import REVIEW_FULL
from cardloop.prompts.card import Card, Message
from cardloop.prompts.conversation import ToolSpec
from cardloop.prompts.redact import DEFAULT_REDACTOR

logger = logging.getLogger(__name__)
EVIDENCE_CHARS = 1_500  # a verification as the run's reason and the pull request's evidence show it

# The first words of a verification's note in the history: the result is read back from them.
VERIFIED = "Verification passed"
NOT_VERIFIED = "COMPLETE was not accepted"
NO_TEST_COMMAND = "no test command"


def tool_specs(names_: list[str] | tuple[str, ...]) -> tuple[ToolSpec, ...]:
    """The native tool definitions for a stage's tool names (config-validated names)."""
    return tuple(spec(TOOLS[n]) for n in names_ if n in TOOLS)


def discard_uncommitted(manager: WorkspaceManager, ws: Workspace) -> None:
    """Tracked changes reset and untracked files removed (ignored ones, such as a virtualenv
    the agent built, stay); commits are kept."""
    manager.run(ws, ["reset", "--hard", "--quiet", "HEAD"])
    manager.run(ws, ["clean", "-fdq"])


def _refused(err: WorkspaceError) -> ApplicationError:
    message = DEFAULT_REDACTOR.redact(str(err)).text
    if err.retryable:
        return ApplicationError(f"workspace: {message}", type="WorkspaceError")
    return ApplicationError(f"workspace: {message}", type=names.WORKSPACE_REFUSED, non_retryable=True)


class WorkspaceActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt
        self._open: dict[str, Workspace] = {}
        self._lock = threading.Lock()
        # One checkpoint at a time per card: a cancelled stage's checkpoint may arrive while an
        # abandoned one still runs (git's index lock would refuse the second).
        self._checkpointing: dict[str, threading.Lock] = {}

    # --- helpers ---------------------------------------------------------------------------

    def _card(self, key: str) -> Card:
        return stored_card(self.rt.store, key)

    def _workspace(self, card_key: str, card: Card) -> Workspace:
        """The worktree this worker holds for the card (made again if it vanished from disk)."""
        with self._lock:
            ws = self._open.get(card_key)
        if ws is None or not ws.path.is_dir():
            try:
                ws = call_with_heartbeat(lambda: self._manager(card).open(card), detail="opening the workspace")
            except WorkspaceError as err:
                raise _refused(err) from None
            with self._lock:
                self._open[card_key] = ws
        return ws

    def _manager(self, card: Card) -> WorkspaceManager:
        """The tenant's manager; a repository the tenant may not use is refused, never cloned."""
        try:
            return self.rt.workspaces(card.tenant, card.repo or "")
        except UpstreamError as err:
            raise ApplicationError(f"workspace: {err}", type=names.WORKSPACE_REFUSED, non_retryable=True) from None

    def _toolbox(self, ws: Workspace, offered: list[str], manager: WorkspaceManager,
                 stop: threading.Event) -> Toolbox:
        cfg = self.rt.config.workspace
        return Toolbox(ToolContext(ws.path, ws.home, self.rt.sandbox(), max_result_chars=cfg.result_max_chars,
                                   git_env=lambda: manager.git_env(ws), stop=stop, view=manager.view(ws)),
                       offered=offered)

    def sweep(self) -> list[str]:
        """Remove the workspaces of done cards (or cards gone from the store) on this worker's
        disk, then those past [workspace] max_age_hours and, oldest first, past max_size_mb.
        The worker runs it every cleanup_interval_seconds; a workspace in use is kept."""
        cfg = self.rt.config.workspace
        store = self.rt.store.inner

        def is_done(card_key: str) -> bool:
            raw = store.workflow_state(card_key)
            if raw is None:
                return store.card_fields(card_key) is None
            return CardState.model_validate_json(raw).status == "done"

        with self._lock:
            keep = set(self._open)
        removed = sweep(cfg.root, is_done, max_bytes=cfg.max_size_mb * 1024 * 1024,
                        max_age_seconds=cfg.max_age_hours * 3600, keep=keep,
                        clone_url_template=self.rt.config.sources.repository.clone_url)
        with self._lock:
            for key in removed:
                self._open.pop(key, None)
        if removed:
            logger.info("removed %d workspace(s): %s", len(removed), ", ".join(removed))
        return removed

    # --- activities ------------------------------------------------------------------------

    @activity.defn(name=names.WORKSPACE_OPEN)
    def open(self, inp: WorkspaceInput) -> WorkspaceInfo:
        """An empty `queue` for a card that names no repository: the stage stays text only."""
        card = self._card(inp.card_key)
        if not card.repo:
            return WorkspaceInfo(queue="", branch="", head="", created_from="the card names no repository")
        with self._lock:  # a workspace reopened here is checked afresh (another worker may have pushed)
            self._open.pop(inp.card_key, None)
        ws = self._workspace(inp.card_key, card)
        manager = self._manager(card)
        if inp.reopen:
            # The lost worker's last turn may have changed files before it died (this machine's
            # worktree survived it): back to the last checkpoint, as the model is told.
            call_with_heartbeat(lambda: discard_uncommitted(manager, ws), detail="back to the last checkpoint")
        head = manager.head(ws)
        found = repository_test_command(card.repo, ws.path, self.rt.config.workspace.test_commands)
        activity.logger.info("workspace for %s on %s (%s), queue %s", inp.card_key, ws.branch, ws.created_from,
                             self.rt.workspace_queue)
        return WorkspaceInfo(queue=self.rt.workspace_queue, branch=ws.branch, head=head,
                             created_from=ws.created_from, test_command=found[0] if found else None,
                             protections=self.rt.sandbox().describe())

    @activity.defn(name=names.TOOL)
    def tool(self, inp: ToolInput) -> ToolOutcome:
        card = self._card(inp.card_key)
        store = self.rt.store

        def act() -> ToolResult:
            if inp.name == "review_comment" and inp.review_full:
                return ToolResult(REVIEW_FULL, is_error=True)
            # A cancelled stage (a move, `card cancel`) kills the command this call runs.
            stop = threading.Event()
            box = self._toolbox(self._workspace(inp.card_key, card), inp.tools, self._manager(card), stop)
            return call_with_heartbeat(lambda: box.execute(inp.name, inp.input), detail=f"running {inp.name}",
                                       stop=stop)

        def record(result: ToolResult) -> int:
            message = Message(role="tool", content=result.text or "(no output)", tool_call_id=inp.call_id,
                              is_error=result.is_error, created_at=datetime.now(UTC))
            return store.append_message(inp.card_key, message, dedup_key=inp.dedup_key, stage=inp.stage)

        once = exactly_once(lambda: store.message_by_key(inp.card_key, inp.dedup_key), act, record,
                            what=f"tool call {inp.dedup_key}")
        seq, message = once.value
        return ToolOutcome(message_seq=seq, is_error=message.is_error,
                           excerpt=DEFAULT_REDACTOR.redact(message.content[:300]).text, reused=not once.acted)

    @activity.defn(name=names.CHECKPOINT)
    def checkpoint(self, inp: CheckpointInput) -> CheckpointResult:
        """Commit and push; a push the remote refuses is an answer (`rejected`), not a retry."""
        card = self._card(inp.card_key)
        ws = self._workspace(inp.card_key, card)
        with self._lock:
            one_at_a_time = self._checkpointing.setdefault(inp.card_key, threading.Lock())

        def commit_and_push() -> Checkpoint:
            with one_at_a_time:
                return self._manager(card).checkpoint(ws, run=str(inp.run), turn=inp.turn)

        try:
            done = call_with_heartbeat(commit_and_push, detail=f"checkpoint after turn {inp.turn}")
        except PushRejected as err:
            return CheckpointResult(rejected=DEFAULT_REDACTOR.redact(str(err)).text[:2000])
        except WorkspaceError as err:
            raise _refused(err) from None
        return CheckpointResult(sha=done.sha, committed=done.committed, pushed=done.pushed, files=list(done.files))

    @activity.defn(name=names.VERIFY)
    def verify(self, inp: VerifyInput) -> VerifyResult:
        """Run the repository's tests as the evidence a claim of COMPLETE needs; the outcome joins
        the history (the model reads why its claim was refused) and is read back from it."""
        card = self._card(inp.card_key)
        store = self.rt.store
        cfg = self.rt.config.workspace

        def act() -> str:
            ws = self._workspace(inp.card_key, card)
            found = repository_test_command(card.repo or "", ws.path, cfg.test_commands)
            if found is None:
                return (f"{NOT_VERIFIED}: {NO_TEST_COMMAND} for {card.repo}: nothing says how to run its tests "
                        "(set one in [workspace.test_commands] of config.toml).")
            stop = threading.Event()
            run = call_with_heartbeat(
                lambda: run_tests(found[0], self.rt.sandbox(), ws.path, ws.home, timeout=cfg.test_timeout_seconds,
                                  max_chars=cfg.result_max_chars, stop=stop, view=self._manager(card).view(ws)),
                detail=f"verifying COMPLETE: {found[0]}", stop=stop)
            if run.passed:
                return f"{VERIFIED}: `{run.command}` succeeded.\n\n{run.output}"
            return (f"{NOT_VERIFIED}: the repository's tests fail. Fix them, then finish again.\n\n"
                    f"{run.output}")

        def record(text: str) -> int:
            message = Message(role="user", author="cardloop", content=text, created_at=datetime.now(UTC))
            return store.append_message(inp.card_key, message, dedup_key=inp.dedup_key, stage=inp.stage)

        once = exactly_once(lambda: store.message_by_key(inp.card_key, inp.dedup_key), act, record,
                            what=f"verification {inp.dedup_key}")
        seq, message = once.value
        text = message.content
        command = text.split("`")[1] if text.startswith(VERIFIED) and text.count("`") >= 2 else ""
        # What the run's reason and the pull request's evidence show: head, tail and the error
        # lines, not the first 1,500 characters (a test runner's warnings come first, its
        # failures and summary last).
        return VerifyResult(passed=text.startswith(VERIFIED), command=command,
                            excerpt=DEFAULT_REDACTOR.redact(excerpt(text, EVIDENCE_CHARS)).text, message_seq=seq,
                            no_command=NO_TEST_COMMAND in text.split("\n", 1)[0])
