"""Board webhooks end to end: signed deliveries through the real app reach the real card
workflow on Temporal; bad deliveries get clear 4xx answers and never move a card."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.app.cards import CardService
from cardloop.contracts.payloads import CardRef
from cardloop.store import Store
from cardloop.store.values import StoreUnavailable
from tests.cardloop.app.api.webhook_kit import SECRET, generic
from tests.cardloop.app.api.webhook_kit import hub_signature as sign
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)
ENV = {"CARDLOOP_GENERIC_WEBHOOK_SECRET": SECRET, "CARDLOOP_GITHUB_WEBHOOK_SECRET": SECRET,
       "CARDLOOP_JIRA_WEBHOOK_SECRET": SECRET, "CARDLOOP_LINEAR_WEBHOOK_SECRET": SECRET,
       "CARDLOOP_TRELLO_SECRET": SECRET, "CARDLOOP_API__MAX_BODY_BYTES": "65536",
       "CARDLOOP_BOARDS__TRELLO__CALLBACK_URL": "https://cardloop.example/webhooks/trello"}


def at(iso: str) -> float:
    """A wall clock reading (seconds since the epoch) for the time a fixture's event happened."""
    return datetime.fromisoformat(iso).timestamp()


@pytest.fixture
async def api(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        svc = Services(config=stack.config, store=stack.store, runtime=stack.runtime, cards=stack.cards, http=http,
                       adapters=build_adapters(stack.config, http))
        app = create_app(svc)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cardloop") as client:
            yield client


async def post(api: httpx.AsyncClient, board: str, body: bytes, signature: str | None = None,
               **headers: str) -> httpx.Response:
    h = {"content-type": "application/json", **headers}
    if signature is not None:
        h["x-hub-signature-256"] = signature
    return await api.post(f"/webhooks/{board}", content=body, headers=h)


@pytest.mark.stack_env(**ENV)
async def test_signed_generic_delivery_moves_the_card_and_its_stage_runs(stack: Stack, api) -> None:
    body = generic("WEB-1", "testing", "g-1")
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200, r.text
    event = r.json()["events"][0]
    assert event["status"] == "accepted" and event["stage"] == "testing"
    ref = CardRef(tenant="default", board="generic", card_id="WEB-1")
    state = await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    assert state.history[0].stage == "testing" and state.history[0].outcome == "completed"
    card = stack.store.card_fields(ref.key)
    assert card is not None and card.title == "Card WEB-1"
    r = await post(api, "generic", body, sign(body))  # the board redelivers
    assert r.json()["events"][0]["status"] == "duplicate"
    state = await stack.cards.state(ref)
    assert state is not None and len(state.history) == 1


@pytest.mark.stack_env(**ENV)
async def test_unsigned_or_wrongly_signed_deliveries_are_401_and_move_nothing(stack: Stack, api) -> None:
    body = generic("WEB-2", "coding", "g-2")
    assert (await post(api, "generic", body)).status_code == 401
    assert (await post(api, "generic", body, "sha256=" + "0" * 64)).status_code == 401
    assert (await post(api, "generic", body, sign(body + b" "))).status_code == 401
    assert stack.store.card_fields("default/generic/WEB-2") is None


async def test_a_board_without_its_secret_refuses_with_503(stack: Stack, api) -> None:
    body = generic("WEB-3", "coding", "g-3")
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 503
    assert "CARDLOOP_GENERIC_WEBHOOK_SECRET" in r.json()["detail"]


@pytest.mark.stack_env(**ENV)
async def test_bad_deliveries_get_clear_4xx(stack: Stack, api) -> None:
    bad = b"{not json"
    r = await post(api, "generic", bad, sign(bad))
    assert r.status_code == 400
    shape = json.dumps({"to_column": "coding"}).encode()
    r = await post(api, "generic", shape, sign(shape))
    assert r.status_code == 400 and "card_id" in r.text
    big = b"{" + b" " * 70_000 + b"}"
    r = await post(api, "generic", big, sign(big))
    assert r.status_code == 413
    r = await post(api, "myspace", b"{}", sign(b"{}"))
    assert r.status_code == 404


@pytest.mark.stack_env(**ENV)
async def test_unmapped_column_is_acknowledged_and_ignored_with_the_reason(stack: Stack, api) -> None:
    body = generic("WEB-4", "Icebox", "g-4")
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200
    event = r.json()["events"][0]
    assert event["status"] == "ignored" and "Icebox" in event["reason"]


@pytest.mark.stack_env(**ENV)
async def test_trello_handshake_head_is_200(stack: Stack, api) -> None:
    assert (await api.head("/webhooks/trello")).status_code == 200
    assert (await api.head("/webhooks/nope")).status_code == 404


@pytest.mark.stack_env(**ENV)
async def test_transition_reaches_a_running_card(stack: Stack, api) -> None:
    stack.model.transcript["planning"] = ["Still planning."]
    stack.model.inject(delay=0.2)
    stack.model.inject(delay=5.0)
    body = generic("WEB-5", "planning", "g-5a")
    assert (await post(api, "generic", body, sign(body))).status_code == 200
    ref = CardRef(tenant="default", board="generic", card_id="WEB-5")
    await stack.cards.wait_for(ref, lambda s: s.status == "running" and s.iteration >= 1, timeout=30)
    body = generic("WEB-5", "testing", "g-5b")
    assert (await post(api, "generic", body, sign(body))).status_code == 200
    state = await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    assert [(r.stage, r.outcome) for r in state.history] == [("planning", "cancelled"), ("testing", "completed")]


@pytest.mark.stack_env(**ENV)
async def test_fuzzed_requests_never_5xx_and_never_move_a_card_unsigned(stack: Stack, api) -> None:
    boards = ["github", "linear", "jira", "trello", "generic"]
    headers = st.dictionaries(st.sampled_from(["x-hub-signature-256", "x-hub-signature", "linear-signature",
                                               "x-trello-webhook", "x-github-event", "x-github-delivery",
                                               "content-type"]),
                              st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=80),
                              max_size=4)
    bodies = st.binary(max_size=2_000) | st.builds(lambda d: json.dumps(d).encode(),
                                                   st.dictionaries(st.text(max_size=10), st.text(max_size=20),
                                                                   max_size=5))

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(board=st.sampled_from(boards), body=bodies, hdrs=headers)
    def run(board: str, body: bytes, hdrs: dict[str, str]) -> None:
        results.append((board, body, hdrs))

    results: list[tuple[str, bytes, dict[str, str]]] = []
    run()
    for board, body, hdrs in results:
        r = await api.post(f"/webhooks/{board}", content=body, headers=hdrs)
        assert r.status_code < 500, (board, body[:100], hdrs, r.text)
        assert r.status_code in (400, 401, 404, 413), (board, r.status_code, r.text)
    started = [wf.id async for wf in stack.client.list_workflows(f"TaskQueue = '{stack.task_queue}'")]
    assert started == [], "an unsigned fuzzed request started a card workflow"


@pytest.mark.stack_env(**ENV)
async def test_comment_with_a_move_creates_the_card_and_joins_its_history(stack: Stack, api) -> None:
    body = generic("WEB-6", "review", "g-6", comment="Please focus on the retry cap.", actor="priya")
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200, r.text
    assert [e["status"] for e in r.json()["events"]] == ["accepted", "accepted"]
    ref = CardRef(tenant="default", board="generic", card_id="WEB-6")
    await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    comments = [m for m in stack.store.messages(ref.key) if m.content == "Please focus on the retry cap."]
    assert len(comments) == 1 and comments[0].author == "priya"


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_github_projects_move_resolves_through_graphql_and_starts_the_stage(stack: Stack) -> None:
    from tests.cardloop.app.boards.conftest import FakeGitHub
    from tests.cardloop.app.boards.github_payloads import (
        FIELD,
        IN_PROGRESS,
        ISSUE,
        ITEM,
        STATUS_FIELD,
        item_node,
        moved,
    )

    github = FakeGitHub()
    github.nodes[FIELD] = STATUS_FIELD
    github.nodes[ITEM] = item_node(ISSUE, status="In Progress")
    config = stack.config.model_copy(update={"boards": {**stack.config.boards, "github": stack.config.board(
        "github").model_copy(update={"graphql_url": github.url})}})
    try:
        async with httpx.AsyncClient() as http:
            svc = Services(config=config, store=stack.store, runtime=stack.runtime, cards=stack.cards, http=http,
                           adapters=build_adapters(config, http), clock=lambda: at("2022-06-08T20:34:26Z"))
            transport = httpx.ASGITransport(app=create_app(svc))
            async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as api:
                body = moved(to=IN_PROGRESS)
                r = await api.post("/webhooks/github", content=body, headers={
                    "x-github-event": "projects_v2_item", "x-github-delivery": "gh-1",
                    "x-hub-signature-256": sign(body), "content-type": "application/json"})
        assert r.status_code == 200, r.text
        event = r.json()["events"][0]
        assert event["stage"] == "coding" and event["status"] == "accepted"
        ref = CardRef.parse(event["card"])
        # Coding ran (a fast run may already have moved on through review and testing to done).
        await stack.cards.wait_for(ref, lambda s: (s.stage == "coding" and s.stage_runs >= 1)
                                   or any(r.stage == "coding" for r in s.history), timeout=60)
        card = stack.store.card_fields(ref.key)
        assert card is not None and card.title == ISSUE["title"] and card.repo == "Octocoders/payments"
    finally:
        github.close()


class SlowStore:
    """The stack's store, with the calls a webhook makes taking `delay` seconds each (a slow database)."""

    SLOW = frozenset({"card_and_ids", "card_fields", "upsert_card", "record_delivery"})

    def __init__(self, store: Store, delay: float) -> None:
        self._store = store
        self._delay = delay
        self.slow_calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name not in self.SLOW:
            return found

        def slow(*args: Any, **kwargs: Any) -> Any:
            self.slow_calls += 1
            time.sleep(self._delay)
            return found(*args, **kwargs)

        return slow


@pytest.mark.stack_env(**ENV)
async def test_a_slow_store_under_a_webhook_never_stalls_the_other_requests(stack: Stack) -> None:
    # A blocked loop shows as a gap of at least the delay; a loaded machine (xdist workers beside
    # this one) stretches a gap by a few hundred ms at most. The margin between the two is what
    # the assertion below tells apart.
    slow = SlowStore(stack.store, delay=1.5)
    async with httpx.AsyncClient() as http:
        svc = Services(config=stack.config, store=slow, runtime=stack.runtime,  # type: ignore[arg-type]
                       cards=CardService(stack.client, slow, stack.config),  # type: ignore[arg-type]
                       http=http, adapters=build_adapters(stack.config, http))
        transport = httpx.ASGITransport(app=create_app(svc))
        async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as api:
            body = generic("WEB-SLOW", "testing", "g-slow")
            delivery = asyncio.create_task(post(api, "generic", body, sign(body)))
            # The app runs on this test's event loop: a store call blocking the loop would hold the
            # probe (or the pause before it) until its sleep ends. Probe until the delivery (4 slow
            # calls, about 6 s) is answered; each gap spans a pause and one probe's answer.
            gaps = []
            while not delivery.done():
                started = time.monotonic()
                await asyncio.sleep(0.05)
                assert (await api.get("/healthz")).status_code == 200
                gaps.append(time.monotonic() - started)
            r = await delivery
    assert r.status_code == 200, r.text
    assert r.json()["events"][0]["status"] == "accepted"
    # card_and_ids (webhook), upsert_card (import), card_fields (start the workflow), record_delivery
    assert slow.slow_calls == 4
    assert len(gaps) >= 10 and max(gaps) < 1.0, [round(g, 3) for g in gaps]


class DownStore:
    """The stack's store with its database gone: every query fails as a dropped connection does."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "schema_version":
            def down() -> int:
                raise StoreUnavailable("the store at postgresql://app@db/cardloop is unreachable")
            return down
        return getattr(self._store, name)


async def test_health_while_the_store_is_down_is_a_503_saying_so(stack: Stack) -> None:
    # It was a 500 "internal error" with two tracebacks per probe, and a Kubernetes liveness probe
    # on it restarted every API pod for a database blip.
    async with httpx.AsyncClient() as http:
        down = DownStore(stack.store)
        svc = Services(config=stack.config, store=down, runtime=stack.runtime,  # type: ignore[arg-type]
                       cards=CardService(stack.client, down, stack.config),  # type: ignore[arg-type]
                       http=http, adapters=build_adapters(stack.config, http))
        transport = httpx.ASGITransport(app=create_app(svc))
        async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as api:
            r = await api.get("/healthz")
            live = await api.get("/livez")  # what the liveness probe reads: no restart for a database blip
    assert r.status_code == 503 and r.json() == {"status": "unavailable", "store": "unavailable: StoreUnavailable"}
    assert live.status_code == 200 and live.json() == {"status": "ok"}


def deliveries(result: str) -> float:
    from prometheus_client import REGISTRY
    return REGISTRY.get_sample_value("cardloop_webhook_deliveries_total", {"board": "generic", "result": result}) or 0.0


@pytest.mark.stack_env(**ENV)
async def test_an_oversized_body_is_counted_invalid_whether_or_not_its_length_was_declared(stack: Stack, api) -> None:
    # A board (or proxy) streaming a body too large is bad input, like one that declares its length:
    # both are 413 and `invalid` in cardloop_webhook_deliveries_total, never `error`.
    big = b"{" + b" " * 70_000 + b"}"
    before = {result: deliveries(result) for result in ("invalid", "error")}

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 8192):
            yield big[start:start + 8192]

    declared = await post(api, "generic", big, sign(big))
    streamed = await api.post("/webhooks/generic", content=chunks(),
                              headers={"content-type": "application/json", "x-hub-signature-256": sign(big)})
    assert declared.status_code == streamed.status_code == 413
    for answer in (declared, streamed):  # the shape of every other refusal of the route
        assert answer.json() == {"status": "refused",
                                 "detail": "request body larger than 65,536 bytes (api.max_body_bytes)"}
    assert "content-length" not in streamed.request.headers
    assert deliveries("error") - before["error"] == 0
    assert deliveries("invalid") - before["invalid"] == 2
