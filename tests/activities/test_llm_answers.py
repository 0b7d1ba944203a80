"""llm.complete when the provider's answer is not one: on Temporal's ActivityEnvironment with a
real SQLite store, the real prompt assembly and the real anthropic client against a loopback
server that answers 200 with a body that is no Message. The attempt fails as a retryable
bad_response and its ledger row is settled "failed", never left "calling" (which `card show`
reads as a call lost with its worker); the next attempt's answer is the turn's."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.llm import LlmActivities
from cardloop.activities.prompt import PromptActivities
from cardloop.contracts.payloads import AssembleInput, CompleteInput
from cardloop.prompts.card import Card, Message
from cardloop.store import Store
from tests.stack import make_config

KEY = "acme/github/PAY-1"
MESSAGE = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
           "content": [{"type": "text", "text": "The plan.\n\n<promise>COMPLETE</promise>"}],
           "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1200, "output_tokens": 80}}


class Answers:
    """A loopback server answering POSTs from a queue of raw bodies, all with status 200."""

    def __init__(self, *bodies: str) -> None:
        self.bodies = deque(bodies)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                data = outer.bodies.popleft().encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run(fn: Any, arg: Any, attempt: int = 1) -> Any:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt, scheduled_time=datetime.now(UTC),
                                   current_attempt_scheduled_time=datetime.now(UTC))
    return env.run(fn, arg)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Store, Answers, ActivityDeps, CompleteInput]]:
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store.upsert_card(KEY, Card.model_validate({"id": "PAY-1", "tenant": "acme", "board": "github",
                                                "title": "Retry webhooks"}))
    store.append_message(KEY, Message(role="user", content="Please plan this."), dedup_key="first")
    server = Answers()
    config = make_config("127.0.0.1:1", "unused")
    rt = ActivityDeps.build(config, store, base_urls={name: server.url for name in config.profiles})
    prompt = run(PromptActivities(rt).assemble,
                 AssembleInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude"))
    inp = CompleteInput(card_key=KEY, stage="planning", run=1, iteration=1, profile="claude",
                        prompt_ref=prompt.prompt_ref, call_key=f"card/{KEY}/1-planning/turn-1")
    try:
        yield store, server, rt, inp
    finally:
        rt.close()
        server.close()
        store.close()


@pytest.mark.parametrize("garbled", [
    "{not json",
    json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    json.dumps([1, 2]),
])
def test_a_garbled_answer_fails_the_attempt_as_retryable_and_closes_its_row(
        setup: tuple[Store, Answers, ActivityDeps, CompleteInput], garbled: str) -> None:
    store, server, rt, inp = setup
    server.bodies.extend([garbled, json.dumps(MESSAGE)])
    with pytest.raises(ApplicationError) as failed:
        run(LlmActivities(rt).complete, inp)
    assert not failed.value.non_retryable and failed.value.type.startswith("Provider:")
    assert failed.value.next_retry_delay is not None  # on the [retry] schedule, said in words
    assert "retrying" in failed.value.message
    done = run(LlmActivities(rt).complete, inp, attempt=2)
    assert done.promise == "COMPLETE" and done.input_tokens == 1200
    rows = store.ledger(KEY)
    assert [(r.attempt, r.status, r.kept) for r in rows] == [(1, "failed", False), (2, "done", True)]
    assert store.usage_totals(KEY).unknown == 0


def test_an_unexpected_error_while_calling_still_closes_the_row(
        setup: tuple[Store, Answers, ActivityDeps, CompleteInput]) -> None:
    """Defence in depth: whatever a provider raises (here a bug reading its answer), the attempt's
    row is settled "failed" with a note, not left "calling" for ever."""
    store, _, rt, inp = setup

    class Broken:
        name = "anthropic"

        def complete(self, *args: Any, **kwargs: Any) -> Any:
            raise KeyError("usage")

    rt._providers["claude"] = Broken()  # type: ignore[assignment]
    with pytest.raises(KeyError):
        run(LlmActivities(rt).complete, inp)
    rows = store.ledger(KEY)
    assert [(r.status, r.note) for r in rows] == [("failed", "unexpected error: KeyError")]


def test_an_answer_without_usage_is_billed_as_estimated(setup: tuple[Store, Answers, ActivityDeps, CompleteInput]
                                                        ) -> None:
    """Some OpenAI-compatible servers send no usage block: the call was recorded as 0 tokens and
    $0, outside every token and cost cap."""
    store, server, rt, inp = setup
    server.bodies.append(json.dumps({k: v for k, v in MESSAGE.items() if k != "usage"}))
    done = run(LlmActivities(rt).complete, inp)
    [row] = store.ledger(KEY)
    assert row.status == "done" and row.note is not None and row.note.startswith("the provider reported no usage")
    assert row.input_tokens > 100 and row.output_tokens > 3 and row.cost_usd > 0
    assert (done.input_tokens, done.output_tokens) == (row.input_tokens, row.output_tokens)
