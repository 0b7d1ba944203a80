"""The run behind bench/chaos.py (its docstring says what it does): the dev server, the worker
processes and their faults, the cards, the audit and the figures. A module of its own so that
chaos.py answers a usage error before these imports (about a second and a half)."""


from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import create_engine
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from cardloop.app.cards import CardService
from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.payloads import CardRef, CardState
from cardloop.prompts.card import Card
from cardloop.store import Store
from cardloop.store.engine import normalize_url

sys.path.insert(0, str(Path(__file__).parent))
from chaos_audit import audit
from chaos_worker import tokens_left

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("planning", "coding", "review", "testing", "error_fixing")
NO_SOURCES = {f"CARDLOOP_CONTEXT__SOURCES__{st.upper()}": "[]" for st in STAGES}


class Worker:
    """The worker process, started again whenever it died. While store kills are left it starts
    armed (bench/chaos_worker.py): the fault is shared by the run's workers and fires in
    whichever one stores the reply it is due at."""

    def __init__(self, env: dict[str, str], log: Path, kill_dir: Path, rng: random.Random) -> None:
        self.env, self.log, self.kill_dir, self.rng = env, log, kill_dir, rng
        self.proc: subprocess.Popen[bytes] | None = None
        self.random_kills = 0

    def ensure(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        env = dict(self.env)
        if tokens_left(self.kill_dir):
            env["CHAOS_KILL_DIR"] = str(self.kill_dir)
            env["CHAOS_KILL_AFTER_REPLY"] = str(self.rng.randint(1, 4))
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "chaos_worker.py")], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            self.random_kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


async def finished(client: Client, ref: CardRef) -> bool:
    try:
        desc = await client.get_workflow_handle(ref.workflow_id).describe()
    except Exception:
        return False
    return desc.status == WorkflowExecutionStatus.COMPLETED


async def poll(cards: CardService, refs: list[CardRef], stop: asyncio.Event, answered: list[int]) -> None:
    """What `card show --follow` and the API do while cards run: query each card's state and its
    running stage's progress, over and over. A query that meets a local activity's end makes
    Temporal cut the workflow task there, which histories must survive on replay."""
    while not stop.is_set():
        for ref in refs:
            try:
                state = await cards.state(ref)
                answered[0] += 1
                if state is not None and await cards.running_turn(ref, state) is not None:
                    answered[0] += 1
            except Exception:  # the worker or the server is down: faults are the point
                await asyncio.sleep(0.2)
        await asyncio.sleep(0.005)


async def retry(what, attempts: int = 60):
    for i in range(attempts):
        try:
            return await what()
        except Exception:
            if i == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    return None


async def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    # Kept after the run (its logs and databases are what a failure is read from): a new temporary
    # directory, or --workdir (a test's own tmp_path, removed with it).
    if args.workdir is not None:
        tmp = args.workdir
        tmp.mkdir(parents=True, exist_ok=True)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="cardloop-chaos-"))
    server = TemporalDevServer(port=free_port(), ui_port=None, db_file=tmp / "temporal.sqlite", retention=None,
                               log_file=tmp / "temporal.log").start()
    model = ScriptedModel(load_transcript(ROOT / "examples" / "transcript.json"), unique=True,
                          latency=args.latency).start()
    schema = f"chaos_{secrets.token_hex(4)}" if args.postgres else None
    db_url = _create_schema(args.postgres, schema) if schema else f"sqlite:///{tmp / 'store.sqlite'}"
    task_queue = "chaos"
    env = {**os.environ, **NO_SOURCES, "ANTHROPIC_API_KEY": "sk-ant-chaos", "DATABASE_URL": db_url,
           "CARDLOOP_TEMPORAL__ADDRESS": server.address, "CARDLOOP_TEMPORAL__TASK_QUEUE": task_queue,
           "CARDLOOP_PROFILES__CLAUDE__BASE_URL": model.url, "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": model.url,
           "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp / "none"),
           # The audit reads activity results straight from the histories: plain payloads here
           # (the payload codec has its own canary test, tests/cardloop/app/test_codec_canary.py).
           "CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}
    config = load_config(REPO_CONFIG, env={k: v for k, v in env.items() if k.startswith("CARDLOOP_")}
                         | {"ANTHROPIC_API_KEY": "sk-ant-chaos"})
    store = Store.open(db_url)
    client = await Client.connect(server.address, data_converter=pydantic_data_converter)
    cards = CardService(client, store, config)
    # One token a store kill, shared by the workers; each worker's log is its own file.
    kill_dir = tmp / "store-kills"
    kill_dir.mkdir()
    for i in range(args.store_kills):
        (kill_dir / f"token-{i}").touch()
    workers = [Worker(env, tmp / ("worker.log" if args.workers == 1 else f"worker-{i}.log"), kill_dir, rng)
               for i in range(args.workers)]
    restarts = 0
    started = time.monotonic()
    passed = False
    try:
        for worker in workers:
            worker.ensure()
        refs = []
        for i in range(args.cards):
            card = Card.model_validate({"id": f"CHAOS-{i}", "tenant": "acme", "board": "chaos", "title": f"Card {i}",
                                        "repo": "acme/payments-api", "body": "Retry failed webhooks with backoff.",
                                        "history": [{"role": "user", "content": "Plan, code, review and test this."}]})
            ref = cards.import_card(card)
            await cards.move(ref, "planning", delivery_id=f"chaos-{i}")
            refs.append(ref)
        # Faults at random moments over the expected length of the run.
        span = args.span
        events = sorted([(rng.uniform(1, span), "kill") for _ in range(args.kills)]
                        + [(rng.uniform(2, span), "restart") for _ in range(args.restarts)])
        done: set[str] = set()
        deadline = started + args.timeout
        stop_polling, answered = asyncio.Event(), [0]
        pollers = [asyncio.create_task(poll(cards, refs, stop_polling, answered)) for _ in range(args.pollers)]
        while time.monotonic() < deadline:
            now = time.monotonic() - started
            while events and events[0][0] <= now:
                _, kind = events.pop(0)
                if kind == "kill":
                    live = [w for w in workers if w.alive()]
                    if live:
                        rng.choice(live).kill()
                else:
                    server.kill()
                    await asyncio.sleep(rng.uniform(0.5, 3.0))
                    server.start()
                    restarts += 1
            await asyncio.sleep(rng.uniform(0.2, 0.6) if not all(w.alive() for w in workers) else 0.2)
            for worker in workers:
                worker.ensure()
            for ref in refs:
                if ref.key not in done and await finished(client, ref):
                    done.add(ref.key)
            if len(done) == len(refs) and not events and not tokens_left(kill_dir):
                break
            if len(done) == len(refs) and not events:
                break  # every card finished before the remaining store kills could fire
        stop_polling.set()
        await asyncio.gather(*pollers)
        for worker in workers:
            worker.ensure()
        states: dict[str, CardState | None] = {}
        for ref in refs:
            states[ref.key] = await retry(lambda ref=ref: cards.state(ref))
        result = await audit(client, store, refs, states)
        finished_cards = sum(1 for st in states.values() if st is not None and st.status == "done")
        figures = {
            "N cards": args.cards, "W workers": args.workers, "store": "postgresql" if schema else "sqlite",
            "K random worker kills": sum(w.random_kills for w in workers),
            "S worker kills right after a stored reply": args.store_kills - len(tokens_left(kill_dir)),
            "M server restarts": restarts,
            "cards finished": finished_cards, "cards lost": args.cards - finished_cards,
            "duplicated messages": result.duplicated_messages,
            "duplicated usage rows": result.duplicated_usage_rows,
            "duplicated stage runs": result.duplicated_stage_runs,
            "replies compared": result.replies_compared,
            "replies acted on that differ from the stored ones": result.replies_differing,
            "queries answered while cards ran": answered[0],
            "model calls made": model.request_count, "calls in the ledger": result.ledger_calls,
            "of them cut by a kill (unsettled)": result.ledger_unsettled,
            "histories replayed": result.histories,
            "histories failing replay": result.histories_failing_replay,
            "seconds": round(time.monotonic() - started, 1), "notes": result.notes[:20],
            "workdir": str(tmp),
        }
        passed = not went_wrong(figures)
        if schema:
            figures["postgres schema"] = f"{schema} ({'dropped' if passed else 'kept: read it there'})"
        return figures
    finally:
        for worker in workers:
            worker.stop()
        model.stop()
        store.close()
        server.stop()
        if schema and passed:
            _drop_schema(args.postgres, schema)


def _create_schema(url: str, schema: str) -> str:
    """A fresh schema in `url`'s database for the run's store; the store URL that uses it."""
    _run_sql(url, f"CREATE SCHEMA {schema}")
    return normalize_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


def _drop_schema(url: str, schema: str) -> None:
    _run_sql(url, f"DROP SCHEMA {schema} CASCADE")


def _run_sql(url: str, statement: str) -> None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def went_wrong(figures: dict) -> bool:
    return bool(figures["cards lost"] or figures["replies acted on that differ from the stored ones"]
                or figures["histories failing replay"] or not _ledger_accounts_for_every_call(figures)
                or figures["duplicated messages"] or figures["duplicated usage rows"]
                or figures["duplicated stage runs"])


def _ledger_accounts_for_every_call(figures: dict) -> bool:
    """Every request the model saw has its row (a row opens before the request leaves), and every
    settled row is a request the model saw; the rows in between are attempts a kill cut after the
    row opened, whether or not their request got out."""
    rows, unsettled, calls = (figures["calls in the ledger"], figures["of them cut by a kill (unsettled)"],
                              figures["model calls made"])
    return rows - unsettled <= calls <= rows
