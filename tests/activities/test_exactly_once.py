"""Side-effect activities follow one rule (activities/once.py): look up the stored result under
the key, act only when there is none, record, and return what the store holds.

The activities run on Temporal's ActivityEnvironment with a real SQLite store, the real prompt
assembly and the scripted model on loopback (every reply unique: "[call N] ..."), so a reply
acted on can be told from the stored one."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.history import HistoryActivities
from cardloop.activities.llm import LlmActivities
from cardloop.activities.prompt import PromptActivities
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.contracts.payloads import AppendInput, AssembleInput, CompleteInput, CompleteResult, SummarizeInput
from cardloop.prompts.card import Card, Message
from cardloop.store import Store
from tests.stack import TRANSCRIPT, make_config

KEY = "acme/github/PAY-1"
CALL = "card/acme/github/PAY-1/1-planning/turn-1"


@dataclass
class Env:
    store: Store
    model: ScriptedModel
    rt: ActivityDeps
    db: Path

    def run(self, fn, arg, *, attempt: int = 1, heartbeats: list | None = None):
        env = ActivityEnvironment()
        # Scheduled now: the model call's own retry bound counts time since its first schedule.
        env.info = dataclasses.replace(env.info, attempt=attempt, scheduled_time=datetime.now(UTC),
                                       current_attempt_scheduled_time=datetime.now(UTC))
        if heartbeats is not None:
            env.on_heartbeat = lambda *d: heartbeats.append(d)
        return env.run(fn, arg)

    def complete_input(self) -> CompleteInput:
        prompt = self.run(PromptActivities(self.rt).assemble,
                          AssembleInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude"))
        return CompleteInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude",
                             prompt_ref=prompt.prompt_ref, call_key=CALL)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    db = tmp_path / "store.sqlite"
    store = Store.open(f"sqlite:///{db}?busy_timeout_ms=1500")
    store.upsert_card(KEY, Card.model_validate({
        "id": "PAY-1", "tenant": "acme", "board": "github", "title": "Retry webhooks", "repo": "acme/pay"}))
    store.append_message(KEY, Message(role="user", content="Please plan this."), dedup_key="first")
    model = ScriptedModel(load_transcript(TRANSCRIPT), unique=True).start()
    config = make_config("127.0.0.1:1", "unused")
    rt = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    try:
        yield Env(store, model, rt, db)
    finally:
        rt.close()
        model.stop()
        store.close()


def stored_text(env: Env, result: CompleteResult) -> str:
    return env.store.messages(KEY, result.message_seq, result.message_seq + 1)[0].content


def acts_on_stored(env: Env, result: CompleteResult) -> bool:
    """The result's excerpt is the stored message's text (or its head, when cut)."""
    text = stored_text(env, result)
    return result.excerpt == text or (result.excerpt.endswith(" […]") and text.startswith(result.excerpt[:-4]))


def test_a_retry_after_the_reply_was_stored_returns_it_without_calling_the_model(env: Env) -> None:
    inp = env.complete_input()
    first = env.run(LlmActivities(env.rt).complete, inp)
    assert first.excerpt.startswith("[call 1] ") and not first.reused
    # The worker died right after the store write: Temporal runs attempt 2 of the same call.
    again = env.run(LlmActivities(env.rt).complete, inp, attempt=2)
    assert env.model.request_count == 1  # no second model call
    assert again.reused and again.message_seq == first.message_seq
    assert acts_on_stored(env, again)  # the workflow acts on the stored reply
    assert (again.input_tokens, again.output_tokens, again.cost_usd) == (
        first.input_tokens, first.output_tokens, first.cost_usd)
    totals = env.store.usage_totals(KEY)
    assert totals.total.calls == 1 == env.model.request_count


def test_a_zombie_attempt_whose_reply_comes_late_acts_on_the_stored_reply_and_is_billed(env: Env) -> None:
    inp = env.complete_input()
    env.model.inject(delay=1.5)  # attempt 1's call hangs: Temporal gives up on it and starts attempt 2
    results: dict[str, CompleteResult] = {}
    zombie = threading.Thread(target=lambda: results.update(z=env.run(LlmActivities(env.rt).complete, inp)))
    zombie.start()
    while env.model.request_count < 1:
        time.sleep(0.01)
    second = env.run(LlmActivities(env.rt).complete, inp, attempt=2)
    zombie.join(10)
    late = results["z"]
    assert env.model.request_count == 2
    stored = stored_text(env, second)
    assert acts_on_stored(env, second) and acts_on_stored(env, late)  # both act on the one stored reply
    assert late.message_seq == second.message_seq and not late.reused
    rows = {r.attempt: r for r in env.store.ledger(KEY)}
    assert len(rows) == 2 == env.model.request_count  # the ledger bills both calls
    assert (rows[1].kept, rows[1].retry, rows[2].kept, rows[2].retry) == (False, True, True, True)
    assert stored.startswith("[call ") and rows[2].output_tokens > 0
    totals = env.store.usage_totals(KEY)
    assert totals.total.cost_usd == totals.own.cost_usd + totals.extra.cost_usd and totals.extra.calls == 1
    assert second.cost_usd == float(rows[2].cost_usd)  # the stage's progress gets the turn's own usage


def test_a_failed_model_call_is_in_the_ledger(env: Env) -> None:
    inp = env.complete_input()
    env.model.inject(status=529)
    with pytest.raises(ApplicationError):
        env.run(LlmActivities(env.rt).complete, inp)
    ok = env.run(LlmActivities(env.rt).complete, inp, attempt=2)
    assert acts_on_stored(env, ok)
    assert [(r.attempt, r.status, r.kept) for r in sorted(env.store.ledger(KEY), key=lambda r: r.attempt)] == [
        (1, "failed", False), (2, "done", True)]
    assert env.store.usage_totals(KEY).total.calls == env.model.request_count == 2


def test_a_summary_already_stored_is_returned_and_each_chunk_call_is_made_once(env: Env) -> None:
    for i in range(6):
        lines = "\n".join(f"step {i}.{j} done" for j in range(120))
        env.store.append_message(KEY, Message(role="assistant" if i % 2 else "user", content=lines), dedup_key=f"m{i}")
    config = make_config("127.0.0.1:1", "unused", CARDLOOP_SUMMARIZER__MAX_INPUT_TOKENS="3000")  # several chunks
    history = HistoryActivities(ActivityDeps.build(config, env.store, base_urls={n: env.model.url
                                                                                 for n in config.profiles}))
    inp = SummarizeInput(card_key=KEY, first=1, last=6, max_tokens=300)
    # Attempt 1: the first chunks answer, the next one is overloaded (529): attempt 1 ends with
    # some chunk results recorded; attempt 2 must not summarize those again.
    env.model.inject(delay=0.0, times=2)
    env.model.inject(status=529, times=1)
    calls_before = 0
    done = None
    for attempt in range(1, 6):
        try:
            done = env.run(history.summarize, inp, attempt=attempt)
            break
        except ApplicationError:
            calls_before = env.model.request_count
    assert done is not None and done.method == "recursive" and calls_before >= 1
    made = env.model.request_count
    keys = [r.call_key for r in env.store.ledger(KEY) if r.status == "done"]
    assert len(keys) == len(set(keys))  # no chunk was summarized twice
    assert env.store.usage_totals(KEY).total.calls == made
    again = env.run(history.summarize, inp, attempt=6)
    assert again.method == "cached" and env.model.request_count == made


def test_append_returns_the_stored_seq(env: Env) -> None:
    history = HistoryActivities(env.rt)
    inp = AppendInput(card_key=KEY, role="user", text="cap the delay", dedup_key="comment-1")
    seq = env.run(history.append, inp)
    assert env.run(history.append, inp.model_copy(update={"text": "other text"}), attempt=2) == seq
    assert env.store.messages(KEY, seq, seq + 1)[0].content == "cap the delay"


def test_a_locked_store_heartbeats_then_fails_typed(env: Env) -> None:
    inp = env.complete_input()
    holder = sqlite3.connect(env.db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another connection holds SQLite's write lock
    beats: list = []
    try:
        with pytest.raises(ApplicationError) as info:
            env.run(LlmActivities(env.rt).complete, inp, heartbeats=beats)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert info.value.type == "StoreUnavailable"
    assert info.value.message == "store unavailable: database is locked"
    assert any("waiting for the store" in str(d) for d in beats)  # alive while it waited
    assert env.model.request_count == 0  # nothing was called before the ledger row could be written
