"""cardloop's own Prometheus metrics: the names are a contract with dashboards and alerts
(deploy/grafana/cardloop.json queries them; tests/cardloop/app/test_metrics.py checks that each
one it queries exists once the code ran).

Counted where the work is recorded, never in workflow code (a replayed workflow would count
twice): the ledger counts every billed model call attempt (tokens and cost, so the metrics sum
to the provider's bill), llm.complete a turn whose reply it stored, history.summarize each
summarizer call and a summary that failed for good (the stage then runs on truncated history),
context.gather a source recorded as unavailable, the API's webhook route each delivery. The
API process counts the model calls it makes itself in the same model-call, token and cost
counters, told apart by their stage label: "gateway" (the prompt gateway's calls) and
"prompt-guard" (the guard model that checks a tenant's prompt), as their ledger rows are; so
the cost counters of the workers and the API together add up to the provider's bill. Stage
runs are counted by the worker's interceptor when a StageWorkflow returns in live execution,
never on replay (cardloop/app/observability/metrics.py).

Served by `cardloop worker` and `cardloop api` on `[observability] metrics_port` together with
the Temporal SDK's own metrics (`temporal_*`); the label values are bounded: stages, outcomes,
configured models and sources, known boards."""

from __future__ import annotations

from decimal import Decimal

from prometheus_client import REGISTRY, CollectorRegistry, Counter

NAMESPACE = "cardloop"


def _counter(name: str, doc: str, labels: tuple[str, ...], registry: CollectorRegistry = REGISTRY) -> Counter:
    return Counter(name, doc, labels, namespace=NAMESPACE, registry=registry)


STAGE_RUNS = _counter("stage_runs", "Stage runs that ended, by stage and outcome "
                      "(completed, blocked, budget_exhausted, failed, cancelled).", ("stage", "outcome"))
TURNS = _counter("turns", "Model turns whose reply was stored, by stage and model.", ("stage", "model"))
MODEL_CALLS = _counter("model_calls", "Billed model call attempts (retries included), by stage, model and "
                       "result (ok, error, cancelled); stage 'gateway' and 'prompt-guard' are the API's own "
                       "calls.", ("stage", "model", "result"))
TOKENS = _counter("tokens", "Tokens billed by the provider, by stage, model and kind "
                  "(input, output, cache_read, cache_write); stage 'summary' is the summarizer, 'gateway' the "
                  "prompt gateway, 'prompt-guard' the guard model.",
                  ("stage", "model", "kind"))
COST = _counter("cost_usd", "Cost in US dollars of billed model calls ([prices] in config.toml), by stage "
                "and model (the API's own calls: stage 'gateway', 'prompt-guard').", ("stage", "model"))
SUMMARIZER_CALLS = _counter("summarizer_calls", "Summarizer model calls whose summary was stored, by model.",
                            ("model",))
SUMMARIES = _counter("summaries", "history.summarize results, by method (llm, recursive, incremental, cached).",
                     ("method",))
SUMMARIZER_FALLBACKS = _counter("summarizer_fallbacks", "Summaries that failed for good: the turn ran on "
                                "truncated history instead.", ())
WEBHOOK_DELIVERIES = _counter("webhook_deliveries", "Board webhook deliveries, by board and result "
                              "(accepted, duplicate, ignored, invalid, refused, unavailable, error).",
                              ("board", "result"))
CONTEXT_SOURCE_FAILURES = _counter("context_source_failures", "Context gathers recorded as unavailable "
                                   "(the stage went on without the source), by source.", ("source",))

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


def billed(stage: str, model: str, *, input_tokens: int, output_tokens: int, cache_read_tokens: int,
           cache_write_tokens: int, cost_usd: Decimal | float, result: str = "ok") -> None:
    """One settled model call attempt: its tokens and cost (a stream that failed or was
    cancelled midway is billed for what it used: `result` says how it ended)."""
    counts = (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    for kind, count in zip(TOKEN_KINDS, counts, strict=True):
        if count:
            TOKENS.labels(stage, model, kind).inc(count)
    if cost_usd:
        COST.labels(stage, model).inc(float(cost_usd))
    MODEL_CALLS.labels(stage, model, result).inc()


def metric_names(registry: CollectorRegistry = REGISTRY) -> set[str]:
    """Every sample name the registry exposes now (counters with their _total)."""
    return {sample.name for family in registry.collect() for sample in family.samples}


__all__ = ["CONTEXT_SOURCE_FAILURES", "COST", "MODEL_CALLS", "STAGE_RUNS", "SUMMARIES", "SUMMARIZER_CALLS",
           "SUMMARIZER_FALLBACKS", "TOKENS", "TOKEN_KINDS", "TURNS", "WEBHOOK_DELIVERIES", "billed", "metric_names"]
