"""Replayed signed deliveries on every board, through the real app and a real Temporal: a body
sent again under a fresh header id is answered "duplicate" and applied once, also after the
card's run closed or continued as new; a signed body outside the replay window is refused; a
delivery that Temporal did not take (503) is applied when it comes again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from cardloop.app.cards import CardService
from cardloop.contracts.payloads import CardRef
from tests.cardloop.app.boards.conftest import FakeGitHub, fixture_bytes, fixture_json
from tests.stack import Stack

from .webhook_kit import (
    ENV,
    Clock,
    at,
    hub_signature,
    linear_signature,
    trello_signature,
    webhook_client,
)

pytestmark = pytest.mark.timeout(240)
# Every board's fixture column runs the testing stage, which ends the card (its run closes).
REPLAY_ENV = {**ENV, "CARDLOOP_GITHUB_TOKEN": "ghp_" + "T" * 36,
              "CARDLOOP_BOARDS__GITHUB__COLUMNS": '{ "In Progress" = "testing" }',
              "CARDLOOP_BOARDS__LINEAR__COLUMNS": '{ "In Progress" = "testing" }',
              "CARDLOOP_BOARDS__JIRA__COLUMNS": '{ "In Progress" = "testing" }',
              "CARDLOOP_BOARDS__TRELLO__COLUMNS": '{ "Doing" = "testing" }'}


@dataclass
class Delivery:
    """One board's signed move: its body, when it happened, and its headers for a header id."""

    board: str
    body: bytes
    sent: float
    card: str
    headers: Callable[[str], dict[str, str]]


def github_delivery() -> Delivery:
    from tests.cardloop.app.boards.github_payloads import IN_PROGRESS, moved

    body = moved(to=IN_PROGRESS)
    return Delivery("github", body, at("2022-06-08T20:34:26Z"), "Octocoders:payments#142", lambda label: {
        "x-github-event": "projects_v2_item", "x-github-delivery": label, "x-hub-signature-256": hub_signature(body)})


def linear_delivery(sent_ms: int = 1741083330456) -> Delivery:
    data = fixture_json("linear/issue_update_state.json")
    data["webhookTimestamp"] = sent_ms
    body = json.dumps(data).encode()
    return Delivery("linear", body, sent_ms / 1000, "ENG-123", lambda label: {
        "linear-delivery": label, "linear-event": "Issue", "linear-signature": linear_signature(body)})


def jira_delivery() -> Delivery:
    body = fixture_bytes("jira/issue_updated_status.json")
    return Delivery("jira", body, 1741083330.456, "PAY-142", lambda label: {
        "x-atlassian-webhook-identifier": label, "x-hub-signature": hub_signature(body)})


def trello_delivery() -> Delivery:
    # Trello's delivery id is the body's action.id: a "new header id" is a header it never reads.
    body = fixture_bytes("trello/update_card_move.json")
    return Delivery("trello", body, at("2025-03-04T10:15:30.456Z"), "aB3dE5fG", lambda label: {
        "x-trello-webhook": trello_signature(body), "x-request-id": label})


def generic_delivery(card: str = "REPLAY-1", **extra: Any) -> Delivery:
    # No delivery_id in the body: the sender names the delivery in the (unsigned) header only.
    body = json.dumps({"card_id": card, "to_column": "testing", "title": "Replay me", **extra}).encode()
    return Delivery("generic", body, 0.0, card, lambda label: {
        "x-delivery-id": label, "x-hub-signature-256": hub_signature(body)})


DELIVERIES = {"github": github_delivery, "linear": linear_delivery, "jira": jira_delivery,
              "trello": trello_delivery, "generic": generic_delivery}


async def send(api: httpx.AsyncClient, clock: Clock, delivery: Delivery, label: str) -> httpx.Response:
    if delivery.sent:
        clock.now = delivery.sent + 5
    return await api.post(f"/webhooks/{delivery.board}", content=delivery.body,
                          headers={"content-type": "application/json", **delivery.headers(label)})


@pytest.fixture
def github_graphql():
    from tests.cardloop.app.boards.github_payloads import FIELD, ISSUE, ITEM, STATUS_FIELD, item_node

    server = FakeGitHub()
    server.nodes[FIELD] = STATUS_FIELD
    server.nodes[ITEM] = item_node(ISSUE, status="In Progress")
    yield server
    server.close()


def with_graphql(stack: Stack, url: str):
    github = stack.config.board("github").model_copy(update={"graphql_url": url})
    return stack.config.model_copy(update={"boards": {**stack.config.boards, "github": github}})


@pytest.mark.parametrize("board", sorted(DELIVERIES))
@pytest.mark.stack_env(**REPLAY_ENV)
async def test_a_signed_body_replayed_under_a_new_header_id_is_a_duplicate_applied_once(
        stack: Stack, github_graphql: FakeGitHub, board: str) -> None:
    delivery = DELIVERIES[board]()
    clock = Clock(0.0)
    config = with_graphql(stack, github_graphql.url)
    async with webhook_client(stack, config=config, clock=clock) as api:
        first = await send(api, clock, delivery, "delivery-1")
        assert first.status_code == 200, first.text
        [accepted] = first.json()["events"]
        assert accepted["status"] == "accepted"
        assert accepted["delivery_id"] == ("67c6d5e2f1a2b3c4d5e6f708" if board == "trello" else "delivery-1")
        ref = CardRef.parse(accepted["card"])
        assert ref.card_id == delivery.card
        state = await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=90)
        assert [r.stage for r in state.history] == ["testing"]
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        await handle.result()  # "done" is set just before the run saves its state and closes
        closed = await handle.describe()
        assert closed.status == WorkflowExecutionStatus.COMPLETED   # the card's run closed when done

        again = await send(api, clock, delivery, "delivery-2")     # the same signed body, a fresh id
        assert again.status_code == 200, again.text
        [duplicate] = again.json()["events"]
        assert duplicate["status"] == "duplicate", duplicate
        assert duplicate["dedup_key"] == accepted["dedup_key"]
    # Applied once: no run was started for the replay; the closed run is still the latest.
    latest = await stack.client.get_workflow_handle(ref.workflow_id).describe()
    assert latest.run_id == closed.run_id and latest.status == WorkflowExecutionStatus.COMPLETED
    assert stack.store.delivery_seen(ref.tenant, board, accepted["dedup_key"])


@pytest.mark.stack_env(**REPLAY_ENV)
async def test_a_linear_retry_with_a_new_send_time_is_the_same_event(stack: Stack) -> None:
    # Linear re-signs a retry with a fresh webhookTimestamp; the event is still the same one.
    first, retry = linear_delivery(1741083330456), linear_delivery(1741083330456 + 40_000)
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock) as api:
        r1 = await send(api, clock, first, "l-1")
        r2 = await send(api, clock, retry, "l-2")
    assert [r1.json()["events"][0]["status"], r2.json()["events"][0]["status"]] == ["accepted", "duplicate"]


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false",
                       CARDLOOP_TEMPORAL__CONTINUE_AS_NEW_AFTER_EVENTS="10")
async def test_a_replay_after_the_card_continued_as_new_is_a_duplicate(stack: Stack) -> None:
    delivery = generic_delivery("REPLAY-CAN")
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock) as api:
        assert (await send(api, clock, delivery, "can-1")).json()["events"][0]["status"] == "accepted"
        ref = CardRef(board="generic", card_id="REPLAY-CAN")
        await stack.wait_state(ref, lambda s: s.stage_runs == 1 and s.status == "idle")
        for _ in range(100):  # idle with a long history: the card continues as new
            runs = [wf async for wf in stack.client.list_workflows(f"WorkflowId = '{ref.workflow_id}'")]
            if len(runs) >= 2:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the card workflow did not continue as new")
        assert (await send(api, clock, delivery, "can-2")).json()["events"][0]["status"] == "duplicate"
        other = generic_delivery("REPLAY-CAN", body="a second, different move")
        assert (await send(api, clock, other, "can-3")).json()["events"][0]["status"] == "accepted"
        state = await stack.wait_state(ref, lambda s: s.stage_runs == 2 and s.status == "idle")
    assert [r.run for r in state.history] == [1, 2]   # the replay ran nothing


@pytest.mark.stack_env(**REPLAY_ENV)
async def test_signed_bodies_outside_the_replay_window_are_refused(stack: Stack) -> None:
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock) as api:
        jira = jira_delivery()
        clock.now = jira.sent + 86_400 + 60   # a day and a minute after the event
        r = await api.post("/webhooks/jira", content=jira.body, headers=jira.headers("late"))
        assert r.status_code == 401 and "replay_window_seconds" in r.json()["detail"]
        sent = 1_700_000_000.0
        fresh = generic_delivery("REPLAY-WIN", timestamp=sent)
        clock.now = sent + 301   # boards.generic.replay_window_seconds is 300
        r = await api.post("/webhooks/generic", content=fresh.body, headers=fresh.headers("g"))
        assert r.status_code == 401, r.text
        clock.now = sent + 10
        r = await api.post("/webhooks/generic", content=fresh.body, headers=fresh.headers("g"))
        assert r.status_code == 200 and r.json()["events"][0]["status"] == "accepted"
        word = generic_delivery("REPLAY-WIN", timestamp="1700000000")   # a string is not a time
        r = await api.post("/webhooks/generic", content=word.body, headers=word.headers("w"))
        assert r.status_code == 400 and "timestamp" in r.text
    assert stack.store.card_fields("default/jira/PAY-142") is None


class TemporalDownOnce(CardService):
    """The stack's CardService whose first move fails as an unreachable Temporal does."""

    failed = False

    async def move(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
        return await super().move(*args, **kwargs)


@pytest.mark.stack_env(**ENV)
async def test_a_delivery_temporal_did_not_take_is_applied_when_it_comes_again(stack: Stack) -> None:
    cards = TemporalDownOnce(stack.client, stack.store, stack.config)
    delivery = generic_delivery("REPLAY-503")
    clock = Clock(0.0)
    async with webhook_client(stack, clock=clock, cards=cards) as api:
        r = await send(api, clock, delivery, "try-1")
        assert r.status_code == 503, r.text
        r = await send(api, clock, delivery, "try-2")   # the board redelivers
        assert r.status_code == 200 and r.json()["events"][0]["status"] == "accepted", r.text
    ref = CardRef(board="generic", card_id="REPLAY-503")
    state = await stack.wait_state(ref, lambda s: s.status == "done")
    assert [r.stage for r in state.history] == ["testing"]
