"""prompt.assemble stores the rendered prompt as a JSON blob that llm.complete parses back. The
store redacts every blob on the way in, so that second pass must leave the JSON whole: a card
whose URL carried `?token=` (already a marker in the prompt) once had the marker's next
backslash taken with it, and every model call of the card failed on `Expecting ',' delimiter`.

Runs the real activity (Temporal's ActivityEnvironment, the worker's ActivityDeps, a real
SQLite store), as the worker does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.prompt import PromptActivities
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.payloads import AssembleInput
from cardloop.prompts.card import Card
from cardloop.store import Store

KEY = "default/generic/SEC-1"
QUERY_TOKEN = "Zk8mQ2xL9vR4" + "tN7bW1cY"
PASSWORD = "Hunter2" + "Xq9zLm"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiJ1c2VyLTkxMiIsImFkbWluIjp0cnVlfQ."
       + "Xk3mPq9vT2rL8nW5bZ7cY4dF6gH1jS0aE3uI9oK2lQ8")


@pytest.fixture
def prompts(tmp_path: Path) -> Iterator[tuple[PromptActivities, Store]]:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "none")})
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    rt = ActivityDeps.build(config, store)
    try:
        yield PromptActivities(rt), store
    finally:
        rt.close()
        store.close()


@pytest.mark.parametrize("card", [
    {"url": f"https://x.example/c?token={QUERY_TOKEN}"},
    {"body": f'The deploy job says "the password was {PASSWORD}"'},
    {"body": f'curl -H "X-Auth: {JWT}" https://api.example.com'},
], ids=["query-token-url", "password-in-quotes", "jwt-in-quotes"])
def test_the_stored_prompt_of_a_card_with_secrets_parses_and_holds_none(
        prompts: tuple[PromptActivities, Store], card: dict[str, str]) -> None:
    activities, store = prompts
    store.upsert_card(KEY, Card.model_validate({"id": "SEC-1", "tenant": "default", "board": "generic",
                                                "title": "Fix the deploy", **card}))

    result = ActivityEnvironment().run(activities.assemble, AssembleInput(
        card_key=KEY, stage="planning", run=1, iteration=1, profile="claude"))

    text = store.get_blob(result.prompt_ref, tenant="default")
    payload = json.loads(text)  # what llm.complete does with it
    assert "[REDACTED:" in json.dumps(payload)
    for secret in (QUERY_TOKEN, PASSWORD, JWT[-20:]):
        assert secret not in text
