"""Spend and abuse limits at the prompt gateway: the real app with the real require_tenant, API
tokens issued by the store (SQLite, and PostgreSQL as the application role), the real Anthropic
client behind it talking to ScriptedModel. A refused call never reaches the model, answers 429
with Retry-After in the caller's shape, and leaves a "refused" row in the ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from cardloop.app.api import tenants
from cardloop.app.scripted_model import ScriptedModel
from cardloop.store import Store, UsageRecord
from tests.cardloop.app.api.gateway_kit import (
    ANTHROPIC,
    OPENAI,
    assert_anthropic_error,
    assert_openai_error,
    build_app,
    build_full_app,
    close_app,
    serve,
)
from tests.conftest import ROOT

MESSAGES = [{"role": "user", "content": "hi"}]
ADMIN = "admin-" + "x" * 32
CLI = Path(sys.executable).parent / "cardloop"


def openai(client: TestClient, token: str, **extra: object):  # type: ignore[no-untyped-def]
    return client.post(OPENAI, json={"model": "m", "messages": MESSAGES, **extra},
                       headers={"authorization": f"Bearer {token}"})


def anthropic(client: TestClient, token: str, **extra: object):  # type: ignore[no-untyped-def]
    return client.post(ANTHROPIC, json={"model": "m", "max_tokens": 50, "messages": MESSAGES, **extra},
                       headers={"authorization": f"Bearer {token}"})


@pytest.fixture
def gateway(tmp_path: Path, model: ScriptedModel) -> Iterator[Callable[..., tuple[TestClient, Store]]]:
    apps = []

    def start(env: dict[str, str], store: Store | None = None) -> tuple[TestClient, Store]:
        store = store or Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
        app = build_app(tmp_path, store=store, env={"CARDLOOP_ADMIN_TOKEN": ADMIN, **env},
                        base_urls={"claude": model.url}, override=False)
        app.include_router(tenants.router)
        client = TestClient(app)
        apps.append((client, app))
        return client, store

    yield start
    for client, app in apps:
        client.close()
        close_app(app)


def test_requests_per_minute_is_429_in_each_callers_shape_before_the_model(
        gateway: Callable[..., tuple[TestClient, Store]], model: ScriptedModel,
        store_factory: Callable[[], Store]) -> None:
    client, store = gateway({"CARDLOOP_LIMITS__REQUESTS_PER_MINUTE": "2"}, store_factory())
    token = store.create_api_token("acme", "ci bot").token
    other = store.create_api_token("globex", "app").token
    assert openai(client, token).status_code == 200
    assert anthropic(client, token).status_code == 200
    r = openai(client, token)
    error = assert_openai_error(r, 429)
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limit_exceeded")
    assert "2 model requests per minute" in error["message"]
    assert 1 <= int(r.headers["retry-after"]) <= 60
    r = anthropic(client, token)
    assert assert_anthropic_error(r, 429)["type"] == "rate_limit_error"
    assert 1 <= int(r.headers["retry-after"]) <= 60
    r = openai(client, token, stream=True)  # a stream is refused before it starts: plain 429
    assert r.status_code == 429 and r.headers["content-type"] == "application/json"
    assert model.request_count == 2  # the refused calls never reached the model
    assert openai(client, other).status_code == 200  # another tenant counts its own
    ledger = store.ledger("acme/gateway/-")
    assert sorted(row.status for row in ledger) == ["done", "done", "refused", "refused", "refused"]
    token_id = store.api_tokens("acme")[0].id
    assert {row.token_id for row in ledger} == {token_id}
    assert all("per minute" in (row.note or "") for row in ledger if row.status == "refused")
    assert store.usage_totals("acme/gateway/-").total.calls == 2  # refusals are not billed
    # GET /tenants/acme/limits: the tenant's own token or the admin token; another tenant's: 404.
    shown = client.get("/tenants/acme/limits", headers={"authorization": f"Bearer {token}"})
    assert shown.status_code == 200, shown.text
    report = shown.json()
    assert report["limits"] == {"requests_per_minute": 2, "tokens_per_day": None, "cost_usd_per_month": None}
    assert report["usage"]["requests_last_minute"] == 2 and report["usage"]["refused_today"] == 3
    assert report["usage"]["tokens_today"] > 0 and report["usage"]["cost_usd_this_month"] > 0
    assert report["tokens"][token_id]["refused_today"] == 3
    assert client.get("/tenants/acme/limits", headers={"authorization": f"Bearer {ADMIN}"}).json() == report
    assert client.get("/tenants/acme/limits", headers={"authorization": f"Bearer {other}"}).status_code == 404
    assert client.get("/tenants/acme/limits").status_code == 401


def test_each_token_has_its_own_limit_and_the_tenants_counts_them_all(
        gateway: Callable[..., tuple[TestClient, Store]], model: ScriptedModel) -> None:
    client, store = gateway({"CARDLOOP_LIMITS__REQUESTS_PER_MINUTE": "3",
                             "CARDLOOP_LIMITS__PER_TOKEN": "{ requests_per_minute = 1 }"})
    first, second, third, fourth = (store.create_api_token("acme", f"app {n}") for n in range(4))
    assert anthropic(client, first.token).status_code == 200
    r = anthropic(client, first.token)
    assert "API token " + first.info.id in assert_anthropic_error(r, 429)["message"]
    assert anthropic(client, second.token).status_code == 200
    assert openai(client, third.token).status_code == 200
    error = assert_openai_error(openai(client, fourth.token), 429)
    assert "tenant 'acme' reached its limit of 3" in error["message"]
    assert model.request_count == 3


def test_a_tenants_monthly_cost_cap_is_insufficient_quota_until_the_month_turns(
        gateway: Callable[..., tuple[TestClient, Store]], model: ScriptedModel, tmp_path: Path) -> None:
    # [tenants.acme.limits] over a [limits] default that globex keeps.
    client, store = gateway({"CARDLOOP_TENANTS__ACME__LIMITS__COST_USD_PER_MONTH": "0.000001",
                             "CARDLOOP_LIMITS__TOKENS_PER_DAY": "1000000"})
    acme = store.create_api_token("acme", "app").token
    globex = store.create_api_token("globex", "app").token
    assert openai(client, acme).status_code == 200  # under the cap when it started
    r = openai(client, acme)
    error = assert_openai_error(r, 429)
    assert error["code"] == "insufficient_quota" and "cost cap of $0.000001 per month" in error["message"]
    now = datetime.now(UTC)
    month_end = (now.replace(day=1, hour=0, minute=0, second=0, microsecond=0) + timedelta(days=32)).replace(day=1)
    assert abs(int(r.headers["retry-after"]) - (month_end - now).total_seconds()) < 5
    assert assert_anthropic_error(anthropic(client, acme), 429)["type"] == "rate_limit_error"
    assert openai(client, globex).status_code == 200 and openai(client, globex).status_code == 200
    assert model.request_count == 3
    # `cardloop tenant show` as an operator runs it, against the same store file.
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'gateway.sqlite'}", "HOME": str(tmp_path),
           "CARDLOOP_TENANTS__ACME__LIMITS__COST_USD_PER_MONTH": "0.000001"}
    run = subprocess.run([str(CLI), "tenant", "show", "acme", "--json"], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=60)
    assert run.returncode == 0 and run.stderr == ""  # no custom prompt is a normal state
    limits = json.loads(run.stdout)["limits"]
    assert limits["limits"]["cost_usd_per_month"] == 0.000001
    assert limits["usage"]["refused_today"] == 2 and limits["usage"]["cost_usd_this_month"] > 0.000001
    text = subprocess.run([str(CLI), "tenant", "show", "acme"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60).stdout
    assert "refused today                2" in text and "of $0.000001 per month" in text


# About 13,000 characters: some 3,200 input tokens, over a cap of 1,000 tokens a day in one call.
LONG_PROMPT = "Please review this change for races and leaks before it ships. " * 200
# Twenty deltas 0.3 s apart (ScriptedModel): the stream is still running when its client leaves.
SLOW_REPLY = "First words arrive early, then more words follow, and yet more, until the end. " * 4


def settled_row(store: Store, timeout: float = 10.0) -> UsageRecord:
    """The gateway's one ledger row once it has left "calling": the server settles a stream the
    client left after the connection closed, so the test waits for it (never for a fixed time)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = store.ledger("acme/gateway/-")
        if (rows and rows[-1].status != "calling") or time.monotonic() > deadline:
            assert len(rows) == 1, rows
            return rows[0]
        time.sleep(0.05)


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_a_stream_the_client_cuts_off_is_billed_and_the_token_cap_then_holds(
        tmp_path: Path, model: ScriptedModel, path: str) -> None:
    """The client hangs up after the first text delta: the call is settled "cancelled" with the
    input tokens the provider's stream reported and the output forwarded so far, so the tenant's
    tokens_per_day counts it and the next call is refused (before, the row stayed "calling" with
    no tokens and every such call went through)."""
    store = Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    app = build_full_app(tmp_path, store=store, env={"CARDLOOP_TENANTS__ACME__LIMITS__TOKENS_PER_DAY": "1000"},
                         base_urls={"claude": model.url})
    auth = {"authorization": f"Bearer {store.create_api_token('acme', 'app').token}"}
    body = {"model": "m", "max_tokens": 200, "stream": True, "messages": [{"role": "user", "content": LONG_PROMPT}]}
    model.inject(content=[{"type": "text", "text": SLOW_REPLY}], chunk_delay=0.3)
    try:
        with serve(app) as url:
            with httpx.stream("POST", url + path, json=body, headers=auth, timeout=10) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if "First words" in line:
                        break  # leaving the block closes the connection mid-stream
            row = settled_row(store)
            assert row.status == "cancelled", row
            assert row.input_tokens + row.cache_read_tokens + row.cache_write_tokens > 3000
            # The first delta or a few, not the whole reply (about 80 tokens).
            assert 1 <= row.output_tokens < 40 and row.cost_usd > 0
            usage = httpx.get(url + "/tenants/acme/limits", headers=auth).json()["usage"]
            assert usage["tokens_today"] == (row.input_tokens + row.output_tokens + row.cache_read_tokens
                                             + row.cache_write_tokens)
            assert usage["cost_usd_this_month"] > 0
            r = httpx.post(url + path, json=body, headers=auth, timeout=10)
            error = assert_openai_error(r, 429) if path == OPENAI else assert_anthropic_error(r, 429)
            assert "cap of 1,000 model tokens per day" in error["message"]
            assert model.request_count == 1  # the refused call never reached the model
    finally:
        close_app(app)


def test_concurrent_calls_hold_their_reservations_so_a_token_cap_admits_only_what_fits(
        tmp_path: Path, model: ScriptedModel, store_factory: Callable[[], Store]) -> None:
    """8 concurrent /v1/messages calls against globex's 2,000 tokens a day, each some 400
    tokens: the ones admitted while others were still running held their prompt plus max_tokens,
    so the calls before the last admitted fit under the cap, as one after another would. Before
    reservations a running call counted nothing and 7 of the 8 were admitted (2,835 tokens)."""
    store = store_factory()
    app = build_full_app(tmp_path, store=store, env={"CARDLOOP_TENANTS__GLOBEX__LIMITS__TOKENS_PER_DAY": "2000"},
                         base_urls={"claude": model.url})
    auth = {"authorization": f"Bearer {store.create_api_token('globex', 'app').token}"}
    body = {"model": "m", "max_tokens": 50, "messages": MESSAGES}
    model.latency = 1.5  # every call is still running when the last one is admitted
    try:
        with serve(app) as url, ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: httpx.post(url + ANTHROPIC, json=body, headers=auth, timeout=30),
                                    range(8)))
            assert {r.status_code for r in answers} == {200, 429}, [r.text for r in answers]
            assert all("cap of 2,000 model tokens per day" in assert_anthropic_error(r, 429)["message"]
                       for r in answers if r.status_code == 429)
            usage = httpx.get(url + "/tenants/globex/limits", headers=auth).json()["usage"]
    finally:
        close_app(app)
    admitted = [r for r in answers if r.status_code == 200]
    used = [r.json()["usage"] for r in admitted]
    sizes = [u["input_tokens"] + u["output_tokens"] + u.get("cache_read_input_tokens", 0)
             + u.get("cache_creation_input_tokens", 0) for u in used]
    assert model.request_count == len(admitted)
    # The calls before the last admitted fit under the cap; the last may end above it by its size.
    assert sum(sizes) - max(sizes) < 2000 <= sum(sizes) + max(sizes), sizes
    assert usage["tokens_today"] == sum(sizes) and usage["reserved_tokens_today"] == 0  # all settled
