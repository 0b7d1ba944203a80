"""A card whose tenant reaches its cap: the stage's next model call is refused before it is
made (TenantLimit from llm.complete), and the stage ends blocked with the reason, its work kept
on the card's branch; the refusal is in the card's ledger. Real Temporal dev server, the real
worker, the scripted model, git on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.app.scripted_model.transcript import check_transcript
from tests.sample_remote import Remote
from tests.stack import Stack, replay_all, small_card
from tests.workflows.agent_kit import AGENT, agent_env

pytestmark = pytest.mark.timeout(120)

RETRY = "app/webhooks/retry.py"


@pytest.fixture
def stack_overrides(remote: Remote, tmp_path: Path) -> dict[str, str]:
    return agent_env(remote, tmp_path)


# The first turn alone uses more than 500 tokens: it is admitted (nothing used yet today),
# the second is refused.
@pytest.mark.stack_env(CARDLOOP_LIMITS__TOKENS_PER_DAY="500")
async def test_a_tenants_token_cap_ends_the_stage_blocked_with_its_work_kept(stack: Stack, remote: Remote) -> None:
    edit = AGENT["coding"][2]  # an edit_file: the first turn's checkpoint reaches the branch
    stack.model.transcript = check_transcript({**AGENT, "coding": [edit, *AGENT["coding"][3:]]}, "limits")
    stack.model.reset()
    ref = stack.cards.import_card(small_card("PAY-9", branch="card/PAY-9"))
    handle = await stack.cards.move(ref, "coding", delivery_id="PAY-9-coding")
    state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=90)
    coding = state.history[0]
    assert (coding.outcome, state.status) == ("blocked", "blocked"), coding.reason
    assert coding.reason.startswith("tenant 'acme' reached its cap of 500 model tokens per day")
    assert "it resets at" in coding.reason
    assert coding.commits == 1
    assert coding.reason.endswith(f"the work is kept on card/PAY-9 at {coding.last_commit[:12]}")
    assert remote.head("card/PAY-9") == coding.last_commit and "capped = min" in remote.show("card/PAY-9", RETRY)
    assert stack.model.request_count == 1  # the refused turn never reached the model
    ledger = stack.store.ledger(ref.key)
    assert [r.status for r in ledger] == ["done", "refused"]
    assert ledger[1].note is not None and ledger[1].note.startswith("tenant 'acme' reached its cap")
    assert stack.store.usage_totals(ref.key).total.calls == 1
    await replay_all(stack.client, handle, "tenant-limit-blocked")
