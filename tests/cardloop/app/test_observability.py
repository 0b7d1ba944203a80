"""Metrics and traces of a real worker on the Temporal dev server, and of the real API app.

One scenario runs once for the module (a card's coding stage with a context source that is
unavailable, a summarizer that fails three times and then works, two model turns; three webhook
deliveries), with the worker's client connected through the Temporal runtime and the tracing
interceptor that `cardloop worker` uses; the tests then read what it left: /metrics scraped over
HTTP from the worker's and the API's metrics ports, the spans an in-memory exporter received,
and the worker's JSON log lines."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.jsonlogs import configure_logging
from cardloop.app.metrics import StageOutcomes
from cardloop.app.observability import start_observability
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.temporal import connect
from cardloop.app.worker import WORKFLOWS, build_worker
from cardloop.prompts.card import Message
from cardloop.store import Store
from tests.cardloop.app.api.webhook_kit import hub_signature
from tests.conftest import ROOT
from tests.stack import TRANSCRIPT, make_config, small_card, terminate_running

pytestmark = pytest.mark.timeout(120)
DASHBOARD = ROOT / "deploy" / "grafana" / "cardloop.json"
SECRET = "webhook-secret-for-observability"
Sample = tuple[str, frozenset[tuple[str, str]]]


@dataclass
class Seen:
    worker_metrics: str
    api_metrics: str
    before: dict[Sample, float]
    spans: list = field(default_factory=list)
    logs: str = ""
    stage_history: object = None
    outcome: str = ""
    webhook_answers: list[int] = field(default_factory=list)


def samples(text: str) -> dict[Sample, float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(text_or_samples: str | dict[Sample, float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    found = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls)


def exposed(text: str) -> set[str]:
    """The sample names as written in the exposition, which is what Prometheus stores."""
    return {m[1] for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.MULTILINE)}


def registry_now() -> dict[Sample, float]:
    return {(s.name, frozenset(s.labels.items())): s.value for f in REGISTRY.collect() for s in f.samples}


def long_history() -> list[dict]:
    return [Message(role="user" if i % 2 == 0 else "assistant",
                    content=f"Message {i}: " + "details about retries and backoff " * 60).model_dump()
            for i in range(120)]


async def _scenario(server: TemporalDevServer, tmp: Path) -> Seen:
    task_queue = f"obs-{uuid.uuid4().hex[:8]}"
    config = make_config(server.address, task_queue,
                         CARDLOOP_OBSERVABILITY__METRICS_PORT=str(free_port()),
                         CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS="false",
                         CARDLOOP_CONTEXT__SOURCES__CODING='["github_actions"]',  # no token: unavailable
                         CARDLOOP_STAGES__CODING__AUTO_ADVANCE="false",
                         CARDLOOP_GENERIC_WEBHOOK_SECRET=SECRET,
                         CARDLOOP_OBSERVABILITY__LOG_FORMAT="json")
    before = registry_now()
    logs = io.StringIO()
    handler = configure_logging(config, stream=logs)
    spans = InMemorySpanExporter()
    obs = await start_observability(config, worker=True, span_exporter=spans, set_global_tracer=False)
    api_config = config.model_copy(update={"observability": config.observability.model_copy(
        update={"metrics_port": free_port()})})
    api_obs = await start_observability(api_config, worker=False)
    store = Store.open(f"sqlite:///{tmp / 'store.sqlite'}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    client = await connect(config, runtime=obs.runtime, interceptors=obs.interceptors)
    deps = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    deps.timeout = 5.0
    worker = build_worker(client, deps)
    task = asyncio.create_task(worker.run())
    try:
        cards = CardService(client, store, config)
        ref = cards.import_card(small_card("OBS-1", history=long_history()))
        model.transcript["coding"] = ["Working on it.", "Done.\n<promise>COMPLETE</promise>"]
        model.inject(status=500, times=3)  # every attempt of the first summary fails: a fallback
        await cards.move(ref, "coding", delivery_id="obs-1")
        state = await cards.wait_for(ref, lambda s: len(s.history) >= 1 and s.status != "running", timeout=90)
        answers = []
        async with httpx.AsyncClient() as http:
            svc = Services(config=config, store=store, runtime=deps, cards=cards, http=http,
                           adapters=build_adapters(config, http))
            app = obs.instrument(create_app(svc))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cardloop") as api:
                comment = json.dumps({"card_id": "NOBODY-1", "comment": "hello", "delivery_id": "x1"}).encode()
                bad = b"{not json"
                for body, signature in ((comment, "sha256=" + "0" * 64), (bad, hub_signature(bad, SECRET)),
                                        (comment, hub_signature(comment, SECRET))):
                    answer = await api.post("/webhooks/generic", content=body,
                                            headers={"content-type": "application/json",
                                                     "x-hub-signature-256": signature})
                    answers.append(answer.status_code)
            worker_metrics = (await http.get(obs.metrics_url)).text
            api_metrics = (await http.get(api_obs.metrics_url)).text
        child = client.get_workflow_handle(f"{ref.workflow_id}/{state.history[0].run}-coding")
        stage_history = await child.fetch_history()
    finally:
        await terminate_running(client, task_queue)
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        await obs.stop()
        await api_obs.stop()
        model.stop()
        store.close()
        logging.getLogger().removeHandler(handler)
    return Seen(worker_metrics, api_metrics, before, list(spans.get_finished_spans()), logs.getvalue(),
                stage_history, state.history[0].outcome, answers)


@pytest.fixture(scope="module")
def seen(temporal_server: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    yield asyncio.run(_scenario(temporal_server, tmp_path_factory.mktemp("observability")))


def grew(seen: Seen, name: str, **labels: str) -> float:
    return value(seen.worker_metrics, name, **labels) - value(seen.before, name, **labels)


def test_the_worker_counts_stage_runs_turns_tokens_cost_and_the_summarizer(seen: Seen) -> None:
    assert seen.outcome == "completed"
    assert grew(seen, "cardloop_stage_runs_total", stage="coding", outcome="completed") == 1
    assert grew(seen, "cardloop_turns_total", stage="coding") == 2
    for kind in ("input", "output"):
        assert grew(seen, "cardloop_tokens_total", stage="coding", kind=kind) > 0, kind
    assert grew(seen, "cardloop_tokens_total", stage="summary", kind="input") > 0
    assert grew(seen, "cardloop_cost_usd_total", stage="coding") > 0
    assert grew(seen, "cardloop_summarizer_fallbacks_total") == 1
    assert grew(seen, "cardloop_summarizer_calls_total") >= 1
    assert grew(seen, "cardloop_model_calls_total", stage="summary", result="error") == 3
    assert grew(seen, "cardloop_context_source_failures_total", source="github_actions") == 1
    models = {dict(labels).get("model") for (name, labels) in samples(seen.worker_metrics)
              if name == "cardloop_turns_total"}
    assert models and None not in models and "unknown" not in models  # the profile's model, the legend


def test_the_worker_serves_the_temporal_sdk_metrics_with_its_own(seen: Seen) -> None:
    names = exposed(seen.worker_metrics)
    for sdk in ("temporal_workflow_completed_total", "temporal_activity_execution_latency_count",
                "temporal_worker_task_slots_available", "temporal_request_total"):
        assert sdk in names, sdk


def test_the_api_counts_webhook_deliveries_by_board_and_result(seen: Seen) -> None:
    assert seen.webhook_answers == [401, 400, 200]
    for result in ("refused", "invalid", "ignored"):
        assert value(seen.api_metrics, "cardloop_webhook_deliveries_total", board="generic", result=result) \
            - value(seen.before, "cardloop_webhook_deliveries_total", board="generic", result=result) == 1, result
    assert "temporal_" not in seen.api_metrics  # the API runs no worker: its own metrics only


def test_every_metric_the_dashboard_queries_exists(seen: Seen) -> None:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 10
    queried = {m for e in exprs for m in re.findall(r"\b((?:cardloop|temporal)_[a-z0-9_]+)\b", e)}
    assert queried - exposed(seen.worker_metrics) - exposed(seen.api_metrics) == set()
    ours = {n for n in queried if n.startswith("cardloop_")}
    assert {"cardloop_stage_runs_total", "cardloop_turns_total", "cardloop_tokens_total", "cardloop_cost_usd_total",
            "cardloop_summarizer_calls_total", "cardloop_summarizer_fallbacks_total",
            "cardloop_webhook_deliveries_total", "cardloop_context_source_failures_total"} <= ours


async def test_a_replayed_stage_is_not_counted_again(seen: Seen) -> None:
    replayer = Replayer(workflows=list(WORKFLOWS), interceptors=[StageOutcomes()],
                        data_converter=pydantic_data_converter)
    counted = REGISTRY.get_sample_value("cardloop_stage_runs_total", {"stage": "coding", "outcome": "completed"})
    await replayer.replay_workflow(seen.stage_history)
    again = REGISTRY.get_sample_value("cardloop_stage_runs_total", {"stage": "coding", "outcome": "completed"})
    assert counted is not None and again == counted


def test_traces_cover_the_workflows_the_activities_and_the_api_request(seen: Seen) -> None:
    names = {s.name for s in seen.spans}
    for name in ("SignalWithStartWorkflow:CardWorkflow", "RunWorkflow:CardWorkflow", "RunWorkflow:StageWorkflow",
                 "RunActivity:llm.complete", "RunActivity:context.gather", "RunActivity:history.summarize",
                 "POST /webhooks/{board}"):
        assert name in names, name
    # One trace from the move (signal-with-start) through the card and stage workflows to each activity.
    [start] = [s for s in seen.spans if s.name == "SignalWithStartWorkflow:CardWorkflow"]
    calls = [s for s in seen.spans if s.name == "RunActivity:llm.complete"]
    assert len(calls) == 2 and {s.context.trace_id for s in calls} == {start.context.trace_id}
    by_id = {s.context.span_id: s for s in seen.spans}
    assert all(s.parent is not None and s.parent.span_id in by_id for s in calls)


def test_worker_logs_are_json_lines_naming_the_card_stage_and_workflow(seen: Seen) -> None:
    lines = [json.loads(line) for line in seen.logs.splitlines() if line.strip()]
    assert lines, "the worker logged"
    unavailable = next(r for r in lines if "context source github_actions unavailable" in r["message"])
    assert unavailable["card_key"] == "acme/github/OBS-1"
    assert unavailable["stage"] == "coding"
    assert unavailable["activity_type"] == "context.gather"
    assert unavailable["workflow_id"].startswith("card/acme/github/OBS-1/") and unavailable["run_id"]
    assert unavailable["level"] == "warning" and "({'activity_id'" not in unavailable["message"]

