"""The tenant's limits at llm.complete: on Temporal's ActivityEnvironment with a real SQLite
store, the real prompt assembly and the scripted model on loopback. A refused call never reaches
the model; requests_per_minute is a retryable rate limit after the window's wait, a token cap a
non-retryable TenantLimit; a reply already stored is returned whatever the limits say."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.llm import LlmActivities
from cardloop.activities.prompt import PromptActivities
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.contracts import names
from cardloop.contracts.payloads import AssembleInput, CompleteInput
from cardloop.prompts.card import Card, Message
from cardloop.store import Store
from tests.stack import TRANSCRIPT, make_config

KEY = "acme/github/PAY-1"


def run(fn: Any, arg: Any, attempt: int = 1) -> Any:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt, scheduled_time=datetime.now(UTC),
                                   current_attempt_scheduled_time=datetime.now(UTC))
    return env.run(fn, arg)


@pytest.fixture
def complete(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Store, ScriptedModel]]:
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store.upsert_card(KEY, Card.model_validate({"id": "PAY-1", "tenant": "acme", "board": "github",
                                                "title": "Retry webhooks"}))
    store.append_message(KEY, Message(role="user", content="Please plan this."), dedup_key="first")
    model = ScriptedModel(load_transcript(TRANSCRIPT), unique=True).start()
    config = make_config("127.0.0.1:1", "unused", **request.param)
    rt = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    prompt = run(PromptActivities(rt).assemble,
                 AssembleInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude"))

    def call(turn: int, attempt: int = 1) -> Any:
        inp = CompleteInput(card_key=KEY, stage="planning", run=1, iteration=turn, profile="claude",
                            prompt_ref=prompt.prompt_ref, call_key=f"card/{KEY}/1-planning/turn-{turn}")
        return run(LlmActivities(rt).complete, inp, attempt)

    try:
        yield call, store, model
    finally:
        rt.close()
        model.stop()
        store.close()


@pytest.mark.parametrize("complete", [{"CARDLOOP_LIMITS__REQUESTS_PER_MINUTE": "1"}], indirect=True)
def test_requests_per_minute_retries_after_the_windows_wait(complete: tuple[Any, Store, ScriptedModel]) -> None:
    call, store, model = complete
    call(1)
    with pytest.raises(ApplicationError) as refused:
        call(2)
    err = refused.value
    assert not err.non_retryable and err.type == "Provider:rate_limited"
    assert err.next_retry_delay is not None and 55 <= err.next_retry_delay.total_seconds() <= 60
    assert "1 model requests per minute" in err.message and "retrying" in err.message
    assert model.request_count == 1
    assert [r.status for r in store.ledger(KEY)] == ["done", "refused"]
    # Attempt 2 of turn 1, whose reply is stored: returned without a call and without a check.
    assert call(1, attempt=2).reused and model.request_count == 1


@pytest.mark.parametrize("complete", [{"CARDLOOP_LIMITS__TOKENS_PER_DAY": "10"}], indirect=True)
def test_a_token_cap_is_a_non_retryable_tenant_limit(complete: tuple[Any, Store, ScriptedModel]) -> None:
    call, store, model = complete
    call(1)
    with pytest.raises(ApplicationError) as refused:
        call(2)
    assert store.ledger(KEY)[-1].note == refused.value.message
    err = refused.value
    assert err.non_retryable and err.type == names.TENANT_LIMIT
    assert err.message.startswith("tenant 'acme' reached its cap of 10 model tokens per day")
    assert err.details[0] == "tokens_per_day"
    assert model.request_count == 1


@pytest.mark.parametrize("complete", [{"CARDLOOP_LIMITS__TOKENS_PER_DAY": "1000000"}], indirect=True)
def test_a_running_turn_holds_its_prompt_and_max_tokens_against_the_cap_until_settled(
        complete: tuple[Any, Store, ScriptedModel]) -> None:
    """While the model answers, the turn's "calling" row holds the assembled prompt's tokens plus
    its max_tokens (so a concurrent call sees them); settled, it counts what the provider reported."""
    import threading

    call, store, model = complete
    model.inject(delay=2.0)
    turn = threading.Thread(target=call, args=(1,))
    turn.start()
    held = 0
    for _ in range(100):
        held = store.limit_usage("acme", datetime.now(UTC))[0].reserved_tokens_today
        if held:
            break
        threading.Event().wait(0.05)
    turn.join(timeout=30)
    (row,) = store.ledger(KEY)
    used = row.input_tokens + row.output_tokens + row.cache_read_tokens + row.cache_write_tokens
    # The reservation: the prompt (some hundreds of tokens) and the profile's max_tokens (thousands).
    assert held > used > 0 and row.status == "done"
    whole, _ = store.limit_usage("acme", datetime.now(UTC))
    assert (whole.tokens_today, whole.reserved_tokens_today) == (used, 0)


def test_a_call_answered_after_its_activity_was_cancelled_is_billed_as_cancelled(tmp_path: Path) -> None:
    """A stage cancelled while its model call runs: the provider still answers and bills it; the
    ledger keeps that bill under "cancelled", not "done" (the reply is not the card's)."""
    import threading

    from temporalio.exceptions import CancelledError

    from cardloop.activities.ledger import provider_for

    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store.upsert_card(KEY, Card.model_validate({"id": "PAY-1", "tenant": "acme", "board": "github",
                                                "title": "Retry webhooks"}))
    store.append_message(KEY, Message(role="user", content="Please plan this."), dedup_key="first")
    model = ScriptedModel(load_transcript(TRANSCRIPT), unique=True).start()
    config = make_config("127.0.0.1:1", "unused")
    rt = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    try:
        prompt = run(PromptActivities(rt).assemble,
                     AssembleInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude"))
        provider_for(rt, "claude")  # warm: the first use imports the provider's SDK (seconds)
        model.inject(delay=3.0)
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, attempt=1, scheduled_time=datetime.now(UTC),
                                       current_attempt_scheduled_time=datetime.now(UTC))
        threading.Timer(1.5, env.cancel).start()
        with pytest.raises(CancelledError):
            env.run(LlmActivities(rt).complete,
                    CompleteInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude",
                                  prompt_ref=prompt.prompt_ref, call_key=f"card/{KEY}/1-planning/turn-1"))
        for _ in range(200):  # the answer arrives after the cancel: its row is settled then
            rows = store.ledger(KEY)
            if rows and rows[0].status != "calling":
                break
            threading.Event().wait(0.05)
        assert [r.status for r in rows] == ["cancelled"] and rows[0].output_tokens > 0
        assert rows[0].cost_usd > 0  # billed: the provider charges for it
    finally:
        rt.close()
        model.stop()
        store.close()
