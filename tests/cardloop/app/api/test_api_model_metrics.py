"""The API process's own model calls (the prompt gateway's, the guard model's) are counted in
the worker's model-call, token and cost counters, told apart by their stage label ("gateway",
"prompt-guard"), so /metrics adds up to what the provider bills. The API's metrics endpoint
is the real one (cardloop/app/observability.py, as `cardloop api` starts it) and is scraped over
HTTP; the gateway and the guard call the scripted model through the real Anthropic client, and
the ledger in a real SQLite store is what the counters must match."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from cardloop.app.devserver import free_port
from cardloop.app.observability import Observability, start_observability
from cardloop.app.scripted_model import ScriptedModel
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.store import Store
from tests.cardloop.app.api import tenants_kit
from tests.cardloop.app.api.gateway_kit import ANTHROPIC, OPENAI, Gateway, reply

GUARD_KEY = "sk-ant-guard-test-key"


@pytest.fixture
def api_metrics(tmp_path: Path) -> Iterator[str]:
    """The API process's /metrics, started as `cardloop api` starts it (no worker)."""
    config = load_config(REPO_CONFIG, env={"CARDLOOP_OBSERVABILITY__METRICS_PORT": str(free_port()),
                                           "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "none")})
    loop = asyncio.new_event_loop()
    obs: Observability = loop.run_until_complete(start_observability(config, worker=False,
                                                                     set_global_tracer=False))
    assert obs.metrics_url is not None
    thread = threading.Thread(target=loop.run_forever, daemon=True)  # the server answers on its loop
    thread.start()
    try:
        yield obs.metrics_url
    finally:
        asyncio.run_coroutine_threadsafe(obs.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def scrape(url: str, name: str, **labels: str) -> float:
    text = httpx.get(url, timeout=10).text
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == name and set(labels.items()) <= set(s.labels.items()))


COUNTERS = (("cardloop_model_calls_total", {"result": "ok"}), ("cardloop_tokens_total", {"kind": "input"}),
            ("cardloop_tokens_total", {"kind": "output"}), ("cardloop_cost_usd_total", {}))


def snapshot(url: str, stage: str) -> dict[str, float]:
    return {f"{name}{sorted(labels.items())}": scrape(url, name, stage=stage, **labels) for name, labels in COUNTERS}


def test_gateway_calls_are_counted_in_the_apis_model_call_token_and_cost_counters(
        gw: Gateway, api_metrics: str) -> None:
    before = snapshot(api_metrics, "gateway")
    reply(gw.model, "Hello from the provider.")
    r = gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 200, r.text
    reply(gw.model, "A streamed answer, in a few chunks. " * 4)
    r = gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 200, "stream": True,
                                        "messages": [{"role": "user", "content": "tell me"}]})
    assert r.status_code == 200, r.text
    after = snapshot(api_metrics, "gateway")
    grew = {k: after[k] - before[k] for k in after}
    rows = [row for row in gw.store.ledger("acme/gateway/-") if row.stage == "gateway"]
    assert len(rows) == 2 and {row.status for row in rows} == {"done"}
    assert grew["cardloop_model_calls_total[('result', 'ok')]"] == 2
    assert grew["cardloop_tokens_total[('kind', 'input')]"] == sum(row.input_tokens for row in rows) > 0
    assert grew["cardloop_tokens_total[('kind', 'output')]"] == sum(row.output_tokens for row in rows) > 0
    # The counters add up to the ledger, which is what the provider bills.
    billed = sum((row.cost_usd for row in rows), Decimal(0))
    assert billed > 0 and abs(Decimal(str(grew["cardloop_cost_usd_total[]"])) - billed) < Decimal("1e-6")
    # Labelled with the configured model, like the worker's calls.
    assert scrape(api_metrics, "cardloop_model_calls_total", stage="gateway", model="claude-sonnet-4-6") >= 2


def test_a_failed_gateway_call_is_counted_as_an_error(gw: Gateway, api_metrics: str) -> None:
    before = scrape(api_metrics, "cardloop_model_calls_total", stage="gateway", result="error")
    gw.model.inject(status=400, times=1)
    r = gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 400, r.text
    assert scrape(api_metrics, "cardloop_model_calls_total", stage="gateway", result="error") - before == 1


def test_guard_model_calls_are_counted_with_their_own_stage(tmp_path: Path, api_metrics: str) -> None:
    with ScriptedModel(api_key=GUARD_KEY) as model:
        store = Store.open(f"sqlite:///{tmp_path}/store.sqlite")
        app, _, runtime = tenants_kit.build_app(tmp_path, store, env={
            "CARDLOOP_TENANT_PROMPTS__GUARD_PROFILE": "claude-fast", "ANTHROPIC_API_KEY": GUARD_KEY})
        runtime.base_urls["claude-fast"] = model.url
        try:
            with TestClient(app) as client:
                token = client.post("/tenants/acme/tokens", json={"name": "ci"},
                                    headers={"authorization": f"Bearer {tenants_kit.ADMIN}"}).json()["token"]
                before = snapshot(api_metrics, "prompt-guard")
                model.inject(content=[{"type": "text", "text": '{"verdict": "allow", "reason": "Fine."}'}])
                r = client.put("/tenants/acme/prompt", json={"custom_system_prompt": "Be a strict reviewer."},
                               headers={"authorization": f"Bearer {token}"})
                assert r.status_code == 200, r.text
                after = snapshot(api_metrics, "prompt-guard")
        finally:
            tenants_kit.close_app(app)
    calls = "cardloop_model_calls_total[('result', 'ok')]"
    assert after[calls] - before[calls] == 1
    assert after["cardloop_cost_usd_total[]"] > before["cardloop_cost_usd_total[]"]
    assert scrape(api_metrics, "cardloop_model_calls_total", stage="prompt-guard", model="claude-haiku-4-5") >= 1
