"""`cardloop card cancel`: the coding agent's running stage stops, and what it did stays: the
chat history, the ledger's calls and the commit already pushed to the card's branch."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cardloop.app.sample_remote import Remote, push_sample_repo
from cardloop.app.scripted_model.transcript import check_transcript
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env

pytestmark = pytest.mark.timeout(240)
BRANCH = "card/CANCEL-1"


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return push_sample_repo(tmp_path / "remotes")


@pytest.fixture
def stack_overrides(remote: Remote, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path)


async def test_card_cancel_stops_the_running_stage_and_keeps_its_work(stack: Stack, remote: Remote,
                                                                     tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    stack.model.transcript = check_transcript(AGENT, "agent transcript")
    stack.model.reset()
    stack.model.inject(times=3)       # coding turns 1-3 answer at once; turn 3 writes the fix ...
    stack.model.inject(delay=12.0)    # ... and turn 4 is still waiting for the model when it is cancelled
    ref = stack.cards.import_card(small_card("CANCEL-1", branch=BRANCH))
    nothing = await cardloop(env, "card", "cancel", ref.key)
    assert nothing.returncode == 1 and "nothing to cancel: it has no running workflow" in nothing.stderr
    await stack.cards.move(ref, "coding", delivery_id="c")
    for _ in range(400):  # the fix's checkpoint reached the remote
        if remote.head(BRANCH) is not None and "turn 3" in remote.commits(BRANCH)[0]:
            break
        await asyncio.sleep(0.1)
    pushed = remote.head(BRANCH)
    out = await cardloop(env, "card", "cancel", ref.key, "--actor", "priya")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"card {ref.key}: cancelled coding run 1 after 4 turn(s); kept: ")
    assert f"1 commit(s) pushed (last {pushed[:12]})" in out.stdout
    state = await stack.cards.state(ref)
    assert state is not None and state.status == "idle" and state.stage == "coding"
    run = state.history[-1]
    assert (run.outcome, run.commits, run.last_commit) == ("cancelled", 1, pushed)
    assert run.reason.startswith("cancelled by priya (card cancel)")
    # The work stays: the branch's commit, the three replies, their calls in the ledger.
    assert remote.head(BRANCH) == pushed
    assert len([m for m in stack.store.messages(ref.key) if m.role == "assistant"]) == 3
    assert stack.store.usage_totals(ref.key).by_stage["coding"].calls >= 3
    again = await cardloop(env, "card", "cancel", ref.key)
    assert again.returncode == 1, again.stdout
    assert "nothing to cancel: no stage runs; the last run (coding run 1) ended cancelled" in again.stderr
    assert "Traceback" not in again.stderr
    bad = await cardloop(env, "card", "cancel", "acme/github/no such card")
    assert bad.returncode == 2 and "card id 'no such card'" in bad.stderr and "Traceback" not in bad.stderr
    # The card goes on from where it was: its next move runs.
    stack.model.transcript["review"] = ["Fine.\n\n<promise>COMPLETE</promise>"]
    await stack.cards.move(ref, "review", delivery_id="r")
    state = await stack.wait_state(ref, lambda s: s.status == "done", timeout=120)
    assert [(r.stage, r.outcome) for r in state.history[1:]] == [("review", "completed"), ("testing", "completed")]
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "card-cancel")


async def test_cancel_and_retry_of_a_card_file_leave_the_stored_card_as_it_is(stack: Stack, tmp_path: Path) -> None:
    # They imported the file first: an old copy of the card file overwrote the stored card's fields
    # (title, body, history) even though there was nothing to cancel or retry.
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("KEEP-1", title="The title on the board now"))
    old = tmp_path / "old.json"
    old.write_text(small_card("KEEP-1", title="An old title").model_dump_json())
    for command in ("cancel", "retry"):
        out = await cardloop(env, "card", command, str(old))
        assert out.returncode == 1, out.stderr
        assert stack.store.card_fields(ref.key).title == "The title on the board now"
    never = tmp_path / "never.json"
    never.write_text(small_card("NEVER-1").model_dump_json())
    out = await cardloop(env, "card", "retry", str(never))
    assert out.returncode == 2 and "not known to the store" in out.stderr, out.stderr
    assert stack.store.card_fields("acme/github/NEVER-1") is None
