"""Board moves delivered out of order, through the real app and Temporal: a late delivery of an
older move (a board's retry of a delivery answered 503, two moves sent in parallel) is answered
"ignored" with both times, never applied, and its redelivery is a duplicate; moves with the same
time, or carrying no time, are applied in arrival order as before."""

from __future__ import annotations

import json

import httpx
import pytest
from temporalio.client import WorkflowHandle

from tests.cardloop.app.api.webhook_kit import ENV, Clock, hub_signature, linear_signature, webhook_client
from tests.cardloop.app.boards.conftest import fixture_json
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)
NOW = 1_800_000_000.0


async def post(api: httpx.AsyncClient, board: str, data: dict[str, object]) -> dict[str, object]:
    body = json.dumps(data).encode()
    header = "x-hub-signature" if board == "jira" else "x-hub-signature-256"
    r = await api.post(f"/webhooks/{board}", content=body, headers={
        "content-type": "application/json", header: hub_signature(body)})
    assert r.status_code == 200, r.text
    return r.json()["events"][-1]


async def moved_to_done(stack: Stack, api: httpx.AsyncClient, card_id: str, delivery_id: str,
                        at: float) -> WorkflowHandle:
    """A generic card moved to done at `at`, its run closed: its workflow's handle."""
    moved = await post(api, "generic", {"card_id": card_id, "to_column": "done", "delivery_id": delivery_id,
                                        "timestamp": at, "title": "Order"})
    assert moved["status"] == "accepted", moved
    handle = stack.client.get_workflow_handle(f"card/default/generic/{card_id}")
    await handle.result()
    return handle


@pytest.mark.stack_env(**ENV)
async def test_a_generic_move_older_than_the_one_applied_is_ignored(stack: Stack) -> None:
    async with webhook_client(stack, clock=Clock(NOW)) as api:
        handle = await moved_to_done(stack, api, "ORD-1", "o-2", NOW - 10)
        closed = await handle.describe()
        late = {"card_id": "ORD-1", "to_column": "coding", "delivery_id": "o-1", "timestamp": NOW - 70}
        older = await post(api, "generic", late)
        assert older["status"] == "ignored", older
        assert older["reason"] == ("an older move (to 'coding' at 2027-01-15T07:58:50Z) than the one the card "
                                   "already took (to 'done' at 2027-01-15T07:59:50Z): the card stays where the "
                                   "newest move put it")
        assert (await post(api, "generic", late))["status"] == "duplicate"
        # The late move started nothing: the card's run that closed on done is still the latest.
        latest = await handle.describe()
        assert (latest.run_id, latest.status) == (closed.run_id, closed.status)
        # A move at the same time as the newest, or without a time, is applied as before.
        same = await post(api, "generic", {"card_id": "ORD-1", "stage": "done", "delivery_id": "o-3",
                                           "timestamp": NOW - 10})
        untimed = await post(api, "generic", {"card_id": "ORD-1", "stage": "done", "delivery_id": "o-4"})
        assert (same["status"], untimed["status"]) == ("accepted", "accepted")


@pytest.mark.stack_env(**ENV)
async def test_a_late_older_move_does_not_take_back_a_card_parked_in_an_unmapped_column(stack: Stack) -> None:
    """A person parks the card in a column cardloop does not map (Backlog): that move is ignored by
    cardloop, yet it is where the board's newest move put the card; a late delivery of an older
    move to a mapped column (review) must not start a run. Found by a tester; before, it did."""
    async with webhook_client(stack, clock=Clock(NOW)) as api:
        handle = await moved_to_done(stack, api, "ORD-2", "p-1", NOW - 20)
        parked = await post(api, "generic", {"card_id": "ORD-2", "to_column": "Backlog", "delivery_id": "p-3",
                                             "timestamp": NOW - 5})
        assert parked["status"] == "ignored" and "is not mapped" in str(parked["reason"]), parked
        closed = await handle.describe()
        late = await post(api, "generic", {"card_id": "ORD-2", "to_column": "review", "delivery_id": "p-2",
                                           "timestamp": NOW - 10})
        assert late["status"] == "ignored", late
        assert "(to 'Backlog' at " in str(late["reason"]) and "the card stays where the newest move put it" in str(
            late["reason"])
        latest = await handle.describe()
        assert (latest.run_id, latest.status) == (closed.run_id, closed.status)  # nothing started
        # A later move to a mapped column is applied as ever.
        again = await post(api, "generic", {"card_id": "ORD-2", "to_column": "done", "delivery_id": "p-4",
                                            "timestamp": NOW - 1})
        assert again["status"] == "accepted", again


@pytest.mark.stack_env(**ENV)
async def test_a_jira_retry_of_an_old_move_after_a_newer_one_is_ignored(stack: Stack) -> None:
    """Jira retries a delivery answered 5xx by itself: the retry of "In Progress" arrives after
    the person's next move, to Done, was applied."""
    moved = fixture_json("jira/issue_updated_status.json")   # To Do -> In Progress
    done = json.loads(json.dumps(moved))
    done["timestamp"] = moved["timestamp"] + 30_000
    done["changelog"]["items"][-1].update(fromString="In Progress", toString="Done")
    async with webhook_client(stack, clock=Clock(done["timestamp"] / 1000 + 5)) as api:
        assert (await post(api, "jira", done))["status"] == "accepted"
        retried = await post(api, "jira", moved)
    assert retried["status"] == "ignored" and "an older move (to 'In Progress'" in str(retried["reason"])
    assert "(to 'Done' at " in str(retried["reason"])


@pytest.mark.stack_env(**ENV)
async def test_a_linear_retry_of_an_old_move_is_ordered_by_the_issues_updated_at(stack: Stack) -> None:
    """Linear retries a failed delivery an hour later with a new webhookTimestamp (the send time):
    the issue's data.updatedAt still says when the move happened."""
    moved = fixture_json("linear/issue_update_state.json")   # -> In Progress, updatedAt 10:15:30
    done = json.loads(json.dumps(moved))
    done["data"]["state"]["name"] = "Done"
    done["data"]["updatedAt"] = "2025-03-04T10:16:00.000Z"
    done["webhookTimestamp"] = moved["webhookTimestamp"] + 30_000
    clock = Clock(0)

    async def send(data: dict[str, object], sent_ms: int) -> dict[str, object]:
        data = {**data, "webhookTimestamp": sent_ms}
        body = json.dumps(data).encode()
        clock.now = sent_ms / 1000 + 1
        r = await api.post("/webhooks/linear", content=body, headers={
            "content-type": "application/json", "linear-signature": linear_signature(body)})
        assert r.status_code == 200, r.text
        return r.json()["events"][-1]

    async with webhook_client(stack, clock=clock) as api:
        assert (await send(done, done["webhookTimestamp"]))["status"] == "accepted"
        retried = await send(moved, moved["webhookTimestamp"] + 3_600_000)
    assert retried["status"] == "ignored", retried
    assert "an older move (to 'In Progress' at 2025-03-04T10:15:30Z)" in str(retried["reason"])
