"""Context sources inside a stage run: a real git repository (file://) feeds the prompt; a
source that cannot answer never fails the stage, and the prompt says what is missing."""

from __future__ import annotations

import pytest

from cardloop.contracts.payloads import CardRef
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)
ENV = {"CARDLOOP_CONTEXT__SOURCES__ERROR_FIXING": '["repository", "github_actions"]',
       "CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE": "false"}


@pytest.fixture
def stack_overrides(repository_env: dict[str, str]) -> dict[str, str]:
    return repository_env


@pytest.mark.stack_env(**ENV)
async def test_sources_feed_the_prompt_and_an_unavailable_one_is_said_not_fatal(stack: Stack) -> None:
    card = small_card("CTX-1", body="The retry delay in app/webhooks/retry.py ignores the cap.")
    ref: CardRef = stack.cards.import_card(card)
    await stack.cards.move(ref, "error_fixing", delivery_id="e1")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1, timeout=120)
    assert state.history[0].outcome == "completed"
    items = stack.store.context_items(ref.key)
    sources = {(i.kind.value, i.title) for i in items}
    assert ("source_file", "app/webhooks/retry.py") in sources
    assert any(kind == "adr" for kind, _ in sources)
    status = {i.source: i.content for i in items if i.kind.value == "source_status"}
    assert "unavailable" in status["cardloop:source/github_actions"]
    assert "CARDLOOP_GITHUB_TOKEN" in status["cardloop:source/github_actions"]
    # What the model saw: the repository's file (with line numbers) and the missing source.
    sent = str(stack.model.last_request["messages"])
    assert "def next_delay" in sent
    assert "GitHub Actions build logs are unavailable" in sent
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id), "context-sources")
