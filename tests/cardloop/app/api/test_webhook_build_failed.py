"""A failed CI run on a card's pull request, through the real app and Temporal: GitHub's real
workflow_run delivery moves the card to error_fixing, and what the board said about the run
(which workflow run failed, on which branch, at which commit, its link) joins the card's history
first, from the board, so the error_fixing stage and the people reading the card see it. A run
that failed on cardloop's own push (its sender is cardloop's account) is no echo: it is fixed."""

from __future__ import annotations

import json

import pytest

from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import Card
from tests.cardloop.app.api.webhook_kit import ENV, Clock, at, hub_signature, webhook_client
from tests.cardloop.app.boards.conftest import fixture_json
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)
CARD = "Codertocat/Hello-World#2"   # the pull request GitHub's example run is linked to
RUN_URL = "https://github.com/octo-org/octo-repo/actions/runs/289782451"
NOTE = f"GitHub Actions workflow 'test' run #163 concluded failure on branch master at 3484a3fb816e: {RUN_URL}"


def failed_run() -> bytes:
    data = fixture_json("github/workflow_run.completed.json")
    data["workflow_run"]["conclusion"] = "failure"
    return json.dumps(data).encode()


async def deliver(stack: Stack, body: bytes, delivery: str) -> dict[str, object]:
    async with webhook_client(stack, clock=Clock(at("2020-10-05T16:33:49Z"))) as api:
        r = await api.post("/webhooks/github", content=body, headers={
            "content-type": "application/json", "x-github-event": "workflow_run", "x-github-delivery": delivery,
            "x-hub-signature-256": hub_signature(body)})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    return event


def a_known_card(stack: Stack) -> CardRef:
    return stack.cards.import_card(Card(id=CARD, tenant="default", board="github", title="Update the README",
                                        repo="Codertocat/Hello-World", branch="changes"))


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE="false")
async def test_the_failed_runs_details_join_the_history_before_error_fixing_starts(stack: Stack) -> None:
    ref = a_known_card(stack)
    event = await deliver(stack, failed_run(), "gh-run-1")
    assert (event["status"], event["stage"]) == ("accepted", "error_fixing")
    await stack.cards.wait_for(ref, lambda s: any(r.stage == "error_fixing" for r in s.history), timeout=60)
    said = [m for m in stack.store.messages(ref.key) if m.content == NOTE]
    assert len(said) == 1 and said[0].author == "github" and said[0].role == "user"
    fixing = [r.body for r in stack.model.requests if "# Stage: error fixing" in str(r.body.get("system"))]
    assert fixing and NOTE in json.dumps(fixing[0]["messages"]), "the stage's first turn did not see the run"

    # GitHub redelivers: the run is said once, the card not moved again.
    again = await deliver(stack, failed_run(), "gh-run-1-redelivered")
    assert again["status"] == "duplicate"
    assert [m.content for m in stack.store.messages(ref.key)].count(NOTE) == 1


@pytest.mark.stack_env(**ENV, CARDLOOP_BOARDS__GITHUB__WRITE_ACTOR='"Codertocat"')
async def test_a_run_that_failed_on_cardloops_own_push_is_fixed_not_taken_for_an_echo(stack: Stack) -> None:
    a_known_card(stack)   # the example run's sender, Codertocat, is cardloop's own account here
    event = await deliver(stack, failed_run(), "gh-run-2")
    assert (event["status"], event["stage"]) == ("accepted", "error_fixing"), event
