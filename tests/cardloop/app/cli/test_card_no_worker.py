"""`cardloop card show` and `card list` on a running card while no worker runs: Temporal still
knows the card's stage and status (search attributes CardStage, CardStatus, which describe()
returns without a worker), so both say those, and that no worker answered, instead of waiting
out the query's 30 s and calling the card "new" or workflow-less. Real parts: the dev server,
a real worker (stopped mid-stage), the scripted model, the `cardloop` command as a process."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.worker import build_worker
from cardloop.store import Store
from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import TRANSCRIPT, Stack, make_config, small_card, terminate_running

pytestmark = pytest.mark.timeout(180)


async def test_show_and_list_fall_back_to_search_attributes_when_no_worker_answers(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    task_queue = f"noworker-{time.monotonic_ns() % 10**8}"
    config = make_config(temporal_server.address, task_queue)
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    runtime.timeout = 60.0
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    cards = CardService(client, store, config)
    stack = Stack(client, store, model, config, runtime, cards, task_queue)
    worker = build_worker(client, runtime)
    task = asyncio.create_task(worker.run())
    try:
        # Planning's first model call holds, so the stage is running when the worker stops; the
        # stop waits for that call (its thread cannot be cut), so the hold is not longer than needed.
        model.inject(delay=8.0)
        ref = cards.import_card(small_card("NOWORK-1"))
        await cards.move(ref, "planning", delivery_id="p")
        await stack.wait_state(ref, lambda s: s.status == "running" and s.stage == "planning", timeout=60)
        await worker.shutdown()  # no worker answers from here on
        await asyncio.gather(task, return_exceptions=True)

        env = cli_env(stack, tmp_path)
        started = time.monotonic()
        shown = await cardloop(env, "card", "show", ref.key)
        took = time.monotonic() - started
        assert shown.returncode == 0, shown.stderr
        assert "no workflow yet" not in shown.stdout
        assert "  stage planning · running (workflow running; from Temporal's search attributes)" in shown.stdout
        # The server says at once that no worker polls (or the query's 5 s run out): either way, said so.
        note = next(ln for ln in shown.stdout.splitlines() if ln.startswith("  note: "))
        assert note.startswith("  note: no worker answered the state query")
        assert note.endswith(f"is a worker running on task queue {task_queue}?; stage runs and progress need a worker")
        assert took < 20  # not the query's 30 s

        as_json = json.loads((await cardloop(env, "card", "show", ref.key, "--json")).stdout)
        assert as_json["state"] is None
        assert as_json["described"]["stage"] == "planning" and as_json["described"]["status"] == "running"
        assert "no worker answered" in as_json["described"]["note"]

        listed = await cardloop(env, "card", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        data = json.loads(listed.stdout)
        [card] = data["cards"]
        assert (card["card"], card["stage"], card["status"], card["live"], card["from"]) == (
            ref.key, "planning", "running", False, "search_attributes")
        assert "no worker answered the state query" in data["note"]
        table = await cardloop(env, "card", "list", "--status", "running")
        assert ref.key in table.stdout and "no worker answered" in table.stdout
    finally:
        await terminate_running(client, task_queue)
        if not task.done():
            await worker.shutdown()
            await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()


async def test_a_move_and_a_comment_sent_while_no_worker_runs_are_taken_up_by_the_next(
        temporal_server: TemporalDevServer, tmp_path: Path) -> None:
    """`card move --wait` and `card say --delivery-id` look at the card first (was the delivery
    applied already? which run will the move lead to?); with no worker to answer they used to fail
    after the query's 30 s and send nothing. Now they say no worker answered, send anyway, and
    `--timeout` holds; the next worker takes both up, each once."""
    task_queue = f"noworker-{time.monotonic_ns() % 10**8}"
    config = make_config(temporal_server.address, task_queue)
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    client = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    cards = CardService(client, store, config)
    stack = Stack(client, store, model, config, runtime, cards, task_queue)
    task: asyncio.Task[None] | None = None
    try:
        ref = cards.import_card(small_card("NOWORK-2"))
        env = cli_env(stack, tmp_path)
        began = time.monotonic()
        moved = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--wait", "--timeout", "4",
                               "--delivery-id", "m-1")
        assert moved.returncode == 124, (moved.returncode, moved.stdout, moved.stderr)  # stopped waiting, as asked
        assert time.monotonic() - began < 25  # not the query's 30 s
        # The card had no workflow yet: the move starts it; the wait says why nothing happens.
        assert "no worker answered the state query" in moved.stdout and "waiting for one" in moved.stdout
        assert "Traceback" not in moved.stderr + moved.stdout
        said = await cardloop(env, "card", "say", ref.key, "a word while no worker runs", "--delivery-id", "c-1")
        assert said.returncode == 0 and "comment sent" in said.stdout, said.stderr
        assert "no worker answered the state query" in said.stderr and "the comment is sent anyway" in said.stderr
        again = await cardloop(env, "card", "say", ref.key, "a word while no worker runs", "--delivery-id", "c-1")
        assert again.returncode == 0, again.stderr  # sent again: the card applies the delivery id once

        worker = build_worker(client, runtime)
        task = asyncio.create_task(worker.run())
        state = await stack.wait_state(ref, lambda s: bool(s.history) and s.status != "running", timeout=90)
        assert [r.stage for r in state.history][:1] == ["planning"]
        assert "m-1" in state.seen_deliveries and "c-1" in state.seen_deliveries
        words = [m for m in store.messages(ref.key) if m.content == "a word while no worker runs"]
        assert len(words) == 1
    finally:
        await terminate_running(client, task_queue)
        if task is not None:
            await worker.shutdown()
            await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()
