"""A short store outage is waited out inside the activity attempt (activities/heartbeat.py), and
a model answer that arrived while the store was down is stored by the retried attempt instead
of calling the model again (activities/received.py).

Real parts: a SQLite store whose write lock another connection holds (as another process
would), a PostgreSQL deployment whose role is locked out (NOLOGIN) and its connections
terminated, the real activities on Temporal's ActivityEnvironment, and the scripted model on
loopback (every reply unique: "[call N] ...", so a second call would show)."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.history import HistoryActivities
from cardloop.activities.llm import LlmActivities
from cardloop.activities.prompt import PromptActivities
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.contracts.payloads import AppendInput, AssembleInput, CompleteInput
from cardloop.prompts.card import Card, Message
from cardloop.store import Store
from tests.postgres import deployment, schema_url
from tests.stack import TRANSCRIPT, make_config

pytestmark = pytest.mark.timeout(120)

KEY = "acme/github/PAY-1"
CALL = "card/acme/github/PAY-1/1-planning/turn-1"


@dataclass
class Env:
    store: Store
    model: ScriptedModel
    rt: ActivityDeps

    def run(self, fn, arg, *, attempt: int = 1, heartbeats: list | None = None):
        env = ActivityEnvironment()
        now = datetime.now(UTC)
        # A scheduled activity with a real start-to-close timeout: the store's patience fits in it.
        env.info = dataclasses.replace(env.info, attempt=attempt, scheduled_time=now,
                                       current_attempt_scheduled_time=now, started_time=now,
                                       start_to_close_timeout=timedelta(minutes=10),
                                       heartbeat_timeout=timedelta(seconds=15))
        if heartbeats is not None:
            env.on_heartbeat = lambda *d: heartbeats.append(d)
        return env.run(fn, arg)

    def complete_input(self) -> CompleteInput:
        prompt = self.run(PromptActivities(self.rt).assemble,
                          AssembleInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude"))
        return CompleteInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude",
                             prompt_ref=prompt.prompt_ref, call_key=CALL)


@contextmanager
def env_on(url: str) -> Iterator[Env]:
    store = Store.open(url)
    store.upsert_card(KEY, Card.model_validate({
        "id": "PAY-1", "tenant": "acme", "board": "github", "title": "Retry webhooks", "repo": "acme/pay"}))
    store.append_message(KEY, Message(role="user", content="Please plan this."), dedup_key="first")
    model = ScriptedModel(load_transcript(TRANSCRIPT), unique=True).start()
    config = make_config("127.0.0.1:1", "unused")
    rt = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    try:
        yield Env(store, model, rt)
    finally:
        rt.close()
        model.stop()
        store.close()


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


@pytest.fixture
def env(sqlite_db: Path) -> Iterator[Env]:
    # The store gives up on a held lock after 0.3 s: each try fails fast with StoreUnavailable.
    with env_on(f"sqlite:///{sqlite_db}?busy_timeout_ms=300") as made:
        yield made


@contextmanager
def sqlite_outage(db: Path) -> Iterator[None]:
    """SQLite's write lock held by another connection until the block ends."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as err:
            out["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_three_second_outage_during_an_activity_is_waited_out_while_heartbeating(env: Env, sqlite_db: Path) -> None:
    history = HistoryActivities(env.rt)
    inp = AppendInput(card_key=KEY, role="user", text="cap the delay", dedup_key="comment-1")
    beats: list = []
    with sqlite_outage(sqlite_db):
        thread, out = in_thread(lambda: env.run(history.append, inp, heartbeats=beats))
        time.sleep(3.0)
        assert thread.is_alive()  # still waiting, in the same attempt
    thread.join(30)
    assert "error" not in out, out.get("error")
    seq = out["result"]
    assert env.store.messages(KEY, seq, seq + 1)[0].content == "cap the delay"
    assert any("waiting for the store (append_message)" in str(d) for d in beats)  # alive meanwhile


def test_an_outage_longer_than_the_patience_still_fails_the_attempt_typed(env: Env, sqlite_db: Path) -> None:
    env.rt.store.patience = 1.0
    history = HistoryActivities(env.rt)
    inp = AppendInput(card_key=KEY, role="user", text="x", dedup_key="comment-2")
    started = time.monotonic()
    with sqlite_outage(sqlite_db), pytest.raises(ApplicationError) as info:
        env.run(history.append, inp)
    assert info.value.type == "StoreUnavailable" and info.value.message == "store unavailable: database is locked"
    assert time.monotonic() - started >= 1.0  # it did wait its patience


def test_an_answer_that_arrived_while_the_store_was_down_is_waited_out_and_billed_once(
        env: Env, sqlite_db: Path) -> None:
    inp = env.complete_input()
    env.model.inject(delay=1.0)  # the store goes down while the model thinks
    thread, out = in_thread(lambda: env.run(LlmActivities(env.rt).complete, inp))
    wait_for(lambda: env.model.request_count == 1)
    with sqlite_outage(sqlite_db):
        time.sleep(3.0)  # the answer arrives at 1 s, into the outage
    thread.join(30)
    assert "error" not in out, out.get("error")
    rows = env.store.ledger(KEY)
    assert env.model.request_count == 1
    assert [(r.attempt, r.status, r.kept) for r in rows] == [(1, "done", True)] and rows[0].output_tokens > 0


def test_an_answer_not_stored_in_its_attempt_is_stored_by_the_retry_without_calling_again(
        env: Env, sqlite_db: Path) -> None:
    inp = env.complete_input()
    env.rt.store.patience = 1.0  # the outage outlasts attempt 1's patience
    env.model.inject(delay=0.5)
    thread, out = in_thread(lambda: env.run(LlmActivities(env.rt).complete, inp))
    wait_for(lambda: env.model.request_count == 1)
    with sqlite_outage(sqlite_db):
        thread.join(30)
        err = out.get("error")
        assert isinstance(err, ApplicationError) and err.type == "StoreUnavailable"
    # The store is back: Temporal runs attempt 2 of the same call on this worker.
    again = env.run(LlmActivities(env.rt).complete, inp, attempt=2)
    assert env.model.request_count == 1  # the provider billed one call, not two
    stored = env.store.messages(KEY, again.message_seq, again.message_seq + 1)[0].content
    assert stored.startswith("[call 1] ") and not again.reused
    rows = env.store.ledger(KEY)
    # Attempt 1's row, settled with the answer's usage by attempt 2's record: no "calling" row left.
    assert [(r.attempt, r.status, r.kept) for r in rows] == [(1, "done", True)]
    assert rows[0].output_tokens > 0 and again.output_tokens == rows[0].output_tokens
    assert env.store.usage_totals(KEY).unknown == 0
    assert len(env.rt.received) == 0  # recorded: no longer kept in memory
    # A later attempt (the worker died before reporting) finds it stored: still one call.
    third = env.run(LlmActivities(env.rt).complete, inp, attempt=3)
    assert third.reused and third.message_seq == again.message_seq and env.model.request_count == 1


@pytest.mark.postgres
def test_a_postgresql_outage_during_a_model_call_is_waited_out_and_billed_once(postgres_admin: Engine) -> None:
    with deployment(postgres_admin, "outage") as (schema, owner, _app), env_on(schema_url(schema, owner)) as env:
        inp = env.complete_input()
        history = HistoryActivities(env.rt)
        env.model.inject(delay=1.0)
        thread, out = in_thread(lambda: env.run(LlmActivities(env.rt).complete, inp))
        wait_for(lambda: env.model.request_count == 1)
        with postgres_admin.begin() as conn:  # the database refuses the role and drops its connections
            conn.exec_driver_sql(f"ALTER ROLE {owner} NOLOGIN")
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"),
                         {"r": owner})
        beats: list = []
        append, appended = in_thread(lambda: env.run(history.append, AppendInput(
            card_key=KEY, role="user", text="during the outage", dedup_key="c-1"), heartbeats=beats))
        time.sleep(3.0)
        with postgres_admin.begin() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {owner} LOGIN")
        thread.join(60)
        append.join(60)
        assert "error" not in out, out.get("error")
        assert "error" not in appended, appended.get("error")
        assert env.model.request_count == 1
        rows = env.store.ledger(KEY)
        assert [(r.attempt, r.status, r.kept) for r in rows] == [(1, "done", True)] and rows[0].output_tokens > 0
        assert any("waiting for the store" in str(d) for d in beats)


def test_a_three_second_outage_during_a_coding_tool_call_is_waited_out(tmp_path: Path) -> None:
    """The tester's case: a tool call (workspace.tool, whose policy allows 3 attempts from 1 s)
    recording its result while the store is down for 3 s: one attempt, not a failed stage."""
    from cardloop.activities.workspace import WorkspaceActivities
    from cardloop.contracts.config import REPO_CONFIG, load_config
    from cardloop.contracts.payloads import ToolInput, WorkspaceInput
    from tests.sample_remote import push_sample_repo
    from tests.stack import small_card

    remote = push_sample_repo(tmp_path / "remotes")
    config = load_config(REPO_CONFIG, env={
        "CARDLOOP_WORKSPACE__ENABLED": "true", "CARDLOOP_WORKSPACE__ROOT": str(tmp_path / "ws"),
        "CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": remote.url_template})
    db = tmp_path / "store.sqlite"
    with Store.open(f"sqlite:///{db}?busy_timeout_ms=300") as store:
        rt = ActivityDeps.build(config, store)
        card = small_card("TOOL-1", branch="card/TOOL-1")
        key = f"{card.tenant}/{card.board}/{card.id}"
        store.upsert_card(key, card)
        env = Env(store, None, rt)  # type: ignore[arg-type]  # no model: a tool call only
        workspace = WorkspaceActivities(rt)
        env.run(workspace.open, WorkspaceInput(card_key=key, stage="coding", run=1))
        inp = ToolInput(card_key=key, stage="coding", call_id="toolu_1", name="read_file",
                        input={"path": "app/webhooks/retry.py"}, dedup_key="tool/1", tools=["read_file"])
        beats: list = []
        with sqlite_outage(db):
            thread, out = in_thread(lambda: env.run(workspace.tool, inp, heartbeats=beats))
            time.sleep(3.0)
            assert thread.is_alive()
        thread.join(30)
        assert "error" not in out, out.get("error")
        outcome = out["result"]
        assert not outcome.is_error and not outcome.reused
        assert store.messages(key, outcome.message_seq, outcome.message_seq + 1)[0].tool_call_id == "toolu_1"
        assert any("waiting for the store (append_message)" in str(d) for d in beats)
        rt.close()
