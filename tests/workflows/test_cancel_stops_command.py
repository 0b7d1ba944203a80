"""A stage cancelled while the agent's command runs: the command is killed on the worker, the
run waits for that, and what the turn's tools wrote is committed and pushed before the run ends
`cancelled`. Before, the command ran on to its end and the turn's files stayed uncommitted in
the worktree until the next run's first checkpoint."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from cardloop.app.sample_remote import Remote, push_sample_repo
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import agent_env

pytestmark = pytest.mark.timeout(180)
BRANCH = "card/CANCEL-CMD"
MARKER = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 997}"


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return push_sample_repo(tmp_path / "remotes")


@pytest.fixture
def stack_overrides(remote: Remote, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path)


def sleeping(seconds: str = MARKER) -> list[int]:
    """PIDs of the agent's `sleep MARKER` (the command itself, not a shell naming it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", seconds.encode()]:
                found.append(int(entry.name))
    return found


async def test_a_cancelled_stage_kills_its_command_and_commits_the_turn(stack: Stack, remote: Remote) -> None:
    stack.model.transcript = {"coding": [[
        {"type": "text", "text": "Writing the notes, then running the long check."},
        {"type": "tool_use", "name": "write_file", "input": {"path": "NOTES.md", "content": "retry notes\n"}},
        {"type": "tool_use", "name": "run_command", "input": {"command": f"sleep {MARKER}"}},
    ]]}
    stack.model.reset()
    ref = stack.cards.import_card(small_card("CANCEL-CMD", branch=BRANCH))
    await stack.cards.move(ref, "coding", delivery_id="c")
    deadline = time.monotonic() + 90
    while not sleeping():
        assert time.monotonic() < deadline, "the agent's command never started"
        await asyncio.sleep(0.1)
    assert remote.head(BRANCH) is None  # nothing was checkpointed yet: the turn is still running

    started = time.monotonic()
    run = await stack.cards.cancel(ref, actor="priya")
    took = time.monotonic() - started
    # The command is gone by the time the cancel answers (it waited for the worker to kill it).
    assert sleeping() == []
    assert took < 30, took
    assert run.outcome == "cancelled" and run.reason.startswith("cancelled by priya")
    # The file the turn wrote is on the branch: committed and pushed by the cancelled run.
    pushed = remote.head(BRANCH)
    assert pushed is not None and (run.commits, run.last_commit) == (1, pushed)
    assert remote.show(BRANCH, "NOTES.md") == "retry notes\n"
    # The command's result is not recorded as the model's tool answer: the run ended before it.
    tool_answers = [m for m in stack.store.messages(ref.key) if m.role == "tool"]
    assert len(tool_answers) == 1 and "NOTES.md" in tool_answers[0].content
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "cancel-stops-command")


async def test_a_command_that_ends_while_the_cancel_is_on_its_way_still_ends_the_run(stack: Stack,
                                                                                    remote: Remote) -> None:
    """The cancel reaches a tool call with its next heartbeat; a command that ends before that
    completes the call normally. The run must still end cancelled there, with the turn
    committed, not go on to its next turn."""
    # 1.5-2 s, and a command line of its own. The tool call's first heartbeat, which brings the
    # cancel, comes 3 s after the call began (activities/heartbeat.py); a command of up to 3 s ran
    # into it when the sandbox took a while to start it on a loaded machine (one CI run), and was
    # killed. The cancel is sent about half a second into the command.
    two = f"1.{500 + uuid.uuid4().int % 499:03d}"
    stack.model.transcript = {"coding": [
        [{"type": "tool_use", "name": "write_file", "input": {"path": "NOTES.md", "content": "notes\n"}},
         {"type": "tool_use", "name": "run_command", "input": {"command": f"sleep {two} && echo {MARKER}"}}],
        [{"type": "tool_use", "name": "write_file", "input": {"path": "NEXT.md", "content": "next turn\n"}}],
    ]}
    stack.model.reset()
    ref = stack.cards.import_card(small_card("CANCEL-RACE", branch="card/CANCEL-RACE"))
    await stack.cards.move(ref, "coding", delivery_id="c")
    deadline = time.monotonic() + 90
    # The command runs, so its tool call has started and sent its first heartbeat: the cancel comes
    # with the next one (throttled to seconds), after the command ended. (Cancelled as soon as the
    # first tool answered, a loaded machine could start the command after the cancel: killed.)
    while not sleeping(two):
        assert time.monotonic() < deadline, "the command never ran"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    run = await stack.cards.cancel(ref, actor="priya")
    assert run.outcome == "cancelled" and run.iterations == 1, run
    answers = [m.content for m in stack.store.messages(ref.key) if m.role == "tool"]
    assert len(answers) == 2 and MARKER in answers[1]  # the command finished and was recorded
    assert remote.show("card/CANCEL-RACE", "NOTES.md") == "notes\n" and run.commits == 1
    assert stack.model.requests and len(stack.model.requests) == 1  # no second turn was asked for
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
