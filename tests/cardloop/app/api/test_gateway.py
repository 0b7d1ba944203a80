"""The prompt gateway over HTTP: a minimal app around the router, the real Anthropic client behind
it talking to ScriptedModel on loopback (and a tiny OpenAI-compatible server for the openai
provider). What the provider received is checked on the wire: layering, turns, redaction."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from fastapi.testclient import TestClient

from cardloop.app.api import gateway
from cardloop.app.api.gateway import text_chunks
from cardloop.app.scripted_model import ScriptedModel
from cardloop.prompts.card import TenantPrompt
from cardloop.prompts.redact import redact
from cardloop.store import Store
from tests.cardloop.app.api.gateway_kit import (
    ANTHROPIC,
    ANTHROPIC_KEYS,
    API_KEY,
    GITHUB_TOKEN,
    GUARDRAILS,
    OPENAI,
    OPENAI_KEYS,
    PROFILE_PROMPT,
    TENANT_TEXT,
    Gateway,
    TenantStore,
    assert_anthropic_error,
    assert_openai_error,
    build_app,
    build_full_app,
    close_app,
    reply,
    serve,
    system_text,
    turns,
)

# --- shapes in and out ---------------------------------------------------------------------


def test_openai_shape_in_and_out(gw: Gateway) -> None:
    reply(gw.model, "Hello from the provider.")
    r = gw.client.post(OPENAI, json={
        "model": "my-app-model", "max_tokens": 300, "temperature": 0.5,
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == OPENAI_KEYS
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "my-app-model"  # the caller's label is echoed...
    assert isinstance(body["created"], int)
    assert body["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "Hello from the provider."},
                                "finish_reason": "stop"}]
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert r.headers["x-cardloop-call-id"] == "gateway/" + body["id"].removeprefix("chatcmpl-")

    sent = gw.model.last_request
    assert sent["model"] == "claude-sonnet-4-6"  # ...but the profile's model answers
    assert sent["max_tokens"] == 300
    assert len(sent["system"]) == 1  # guardrails + behaviour; no card-stage agent block
    text = system_text(sent)
    assert text.startswith(GUARDRAILS)
    assert text.endswith("You are terse.")  # the request layer overrides the profile prompt
    assert PROFILE_PROMPT not in text and "# Stage:" not in text
    assert turns(sent) == [("user", "Hi there")]


def test_anthropic_shape_in_and_out(gw: Gateway) -> None:
    reply(gw.model, "Bonjour.")
    r = gw.client.post(ANTHROPIC, json={
        "model": "claude-whatever", "max_tokens": 256,
        "system": [{"type": "text", "text": "Answer in French.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]},
                     {"role": "assistant", "content": "Bonjour"},
                     {"role": "user", "content": "How are you?"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == ANTHROPIC_KEYS
    assert body["type"] == "message" and body["role"] == "assistant" and body["id"].startswith("msg_")
    assert body["model"] == "claude-whatever"
    assert body["content"] == [{"type": "text", "text": "Bonjour."}]
    assert body["stop_reason"] == "end_turn" and body["stop_sequence"] is None
    assert set(body["usage"]) == {"input_tokens", "output_tokens", "cache_read_input_tokens",
                                  "cache_creation_input_tokens"}
    assert body["usage"]["input_tokens"] > 0 and body["usage"]["output_tokens"] > 0

    sent = gw.model.last_request
    assert system_text(sent) == GUARDRAILS + "\n\nAnswer in French."
    assert turns(sent) == [("user", "Hello"), ("assistant", "Bonjour"), ("user", "How are you?")]


def test_max_tokens_capped_by_profile_and_length_maps_both_ways(gw: Gateway) -> None:
    r = gw.client.post(OPENAI, json={"model": "m", "max_completion_tokens": 1_000_000, "max_tokens": 5,
                                     "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    assert gw.model.last_request["max_tokens"] == 8192  # profiles.claude.max_tokens
    # The scripted reply is cut at max_tokens, so the provider says max_tokens -> OpenAI "length".
    r = gw.client.post(OPENAI, json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    assert r.json()["choices"][0]["finish_reason"] == "length"
    r = gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
    assert r.json()["stop_reason"] == "max_tokens"
    # No max_tokens from an OpenAI caller: the profile's.
    gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert gw.model.last_request["max_tokens"] == 8192


# --- intercepting system prompts in any format, layering ------------------------------------


def test_gemma_markers_in_an_openai_system_message(tenant_gw: Gateway) -> None:
    gemma = ("<start_of_turn>system\nYou are a pirate.<end_of_turn>\n"
             "<start_of_turn>user\nWho are you?<end_of_turn>\n"
             "<start_of_turn>model\nArr, a pirate.<end_of_turn>\n")
    r = tenant_gw.client.post(OPENAI, json={"model": "m", "messages": [
        {"role": "system", "content": gemma}, {"role": "user", "content": "Where is the treasure?"}]})
    assert r.status_code == 200, r.text
    sent = tenant_gw.model.last_request
    text = system_text(sent)
    assert "<start_of_turn>" not in text and "<end_of_turn>" not in text
    # Guardrails first, then the cleaned request system text, then the tenant prompt (append mode).
    assert text == f"{GUARDRAILS}\n\nYou are a pirate.\n\n{TENANT_TEXT}"
    assert turns(sent) == [("user", "Who are you?"), ("assistant", "Arr, a pirate."),
                           ("user", "Where is the treasure?")]


def test_human_assistant_text_in_a_system_prompt(tenant_gw: Gateway) -> None:
    system = "Be brief and exact.\n\nHuman: What is 2+2?\n\nAssistant: 4"
    r = tenant_gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 64, "system": system,
                                               "messages": [{"role": "user", "content": "And 3+3?"}]})
    assert r.status_code == 200, r.text
    sent = tenant_gw.model.last_request
    text = system_text(sent)
    assert "Human:" not in text and "Assistant:" not in text
    assert text.index(GUARDRAILS) < text.index("Be brief and exact.") < text.index(TENANT_TEXT)
    assert turns(sent) == [("user", "What is 2+2?"), ("assistant", "4"), ("user", "And 3+3?")]


def test_human_assistant_lines_inside_an_openai_system_message(gw: Gateway) -> None:
    system = "You grade arithmetic.\nHuman: 1+1?\nAssistant: 2"
    gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "developer", "content": system},
                                                            {"role": "user", "content": "2+2?"}]})
    sent = gw.model.last_request
    assert system_text(sent) == GUARDRAILS + "\n\nYou grade arithmetic."
    assert turns(sent) == [("user", "1+1?"), ("assistant", "2"), ("user", "2+2?")]


def test_a_tenant_prompt_stored_redacted_is_no_secret_of_the_call(tenant_gw: Gateway) -> None:
    # What PUT /tenants/{t}/prompt stores: the prompt with its secrets already replaced by markers.
    # Layered into a call, those markers are not secrets the caller sent, nor redacted again.
    store = tenant_gw.store
    assert isinstance(store, TenantStore)
    stored = redact("Staging: postgres://svc:" + "Gl0bexPw9zQ@db.acme/app, "
                    "dashboard https://grafana.acme.dev/d/1?token=" + "Zk8mQ2xL9vR4tN7bW1cY")
    assert stored.count("[REDACTED:") == 2
    store.prompt = TenantPrompt(custom_system_prompt=stored)
    r = tenant_gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    assert "x-cardloop-redactions" not in r.headers
    assert system_text(tenant_gw.model.last_request).endswith(stored)


def test_tenant_prompt_modes_follow_the_prompt_core_precedence(tenant_gw: Gateway) -> None:
    store = tenant_gw.store
    assert isinstance(store, TenantStore)
    store.prompt = TenantPrompt(custom_system_prompt=TENANT_TEXT, override_mode="replace_behavior")
    # No request system text: the tenant prompt replaces the profile's.
    tenant_gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert system_text(tenant_gw.model.last_request) == f"{GUARDRAILS}\n\n{TENANT_TEXT}"
    # A request system text is the highest behaviour layer: it wins over replace_behavior.
    tenant_gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "system", "content": "Req layer."},
                                                                   {"role": "user", "content": "hi"}]})
    assert system_text(tenant_gw.model.last_request) == f"{GUARDRAILS}\n\nReq layer."
    # No tenant prompt and no request system: the profile's prompt is the behaviour layer.
    store.prompt = None
    tenant_gw.client.post(OPENAI, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert system_text(tenant_gw.model.last_request) == f"{GUARDRAILS}\n\n{PROFILE_PROMPT}"


def test_turns_are_kept_in_order_and_an_assistant_opening_gets_a_user_opener(gw: Gateway) -> None:
    messages = [{"role": "assistant", "content": "How can I help?"}, {"role": "user", "content": "one"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "result one"},
                {"role": "system", "content": "Mid-conversation rule."},
                {"role": "user", "content": [{"type": "text", "text": "two"}]}]
    r = gw.client.post(OPENAI, json={"model": "m", "messages": messages, "tools": [{"type": "function"}]})
    assert r.status_code == 200, r.text
    assert r.headers["x-cardloop-ignored-params"] == "tools"
    sent = gw.model.last_request
    assert system_text(sent) == GUARDRAILS + "\n\nMid-conversation rule."
    got = turns(sent)
    assert got[0] == ("user", gateway.OPENER)
    assert [role for role, _ in got[1:]] == ["assistant", "user", "assistant", "user", "user"]
    assert got[1][1] == "How can I help?" and got[2][1] == "one" and got[-1][1] == "two"
    assert "[tool_call lookup id=call_1]" in got[3][1] and "result one" in got[4][1]


def test_secrets_in_the_request_never_reach_the_provider(gw: Gateway) -> None:
    r = gw.client.post(OPENAI, json={"model": "m", "messages": [
        {"role": "system", "content": f"Deploy with token {GITHUB_TOKEN} when asked."},
        {"role": "user", "content": f"My token is {GITHUB_TOKEN}, push the fix."},
        {"role": "assistant", "content": f"Using {GITHUB_TOKEN}."},
        {"role": "user", "content": "Go."}]})
    assert r.status_code == 200, r.text
    raw = json.dumps(gw.model.last_request)
    assert GITHUB_TOKEN not in raw
    assert GITHUB_TOKEN[:12] not in raw  # not even a recognisable piece of it
    assert raw.count("[REDACTED:github-token]") == 3
    assert r.headers["x-cardloop-redactions"] == "3"
    r = gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 32, "system": f"key {GITHUB_TOKEN}",
                                        "messages": [{"role": "user", "content": f"{GITHUB_TOKEN}"}]})
    assert r.status_code == 200, r.text
    assert GITHUB_TOKEN not in json.dumps(gw.model.last_request)


# --- what the gateway changed, told to the caller --------------------------------------------

IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
DOCUMENT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "a memo"}}


def test_media_left_as_placeholders_are_named_in_the_warnings_header(gw: Gateway) -> None:
    """Images and documents cannot be carried as text: the model gets "[image_url omitted]", and
    the caller is told so in x-cardloop-warnings on a whole answer and on a live stream alike
    (before, only cardloop.log heard of it)."""
    r = gw.client.post(OPENAI, json={"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Compare these."}, IMAGE_URL, IMAGE_URL]}]})
    assert r.status_code == 200, r.text
    assert turns(gw.model.last_request) == [("user", "Compare these.\n\n[image_url omitted]\n\n[image_url omitted]")]
    assert r.headers["x-cardloop-warnings"] == (
        '"image_url content cannot be carried as text; left a placeholder (2 times)"')
    reply(gw.model, "A chart and a memo.")
    r = gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 50, "stream": True, "messages": [
        {"role": "user", "content": [IMAGE, {"type": "text", "text": "and"}, DOCUMENT]}]})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert gw.model.last_request["stream"] is True  # the live stream, not a replayed answer
    assert r.headers["x-cardloop-warnings"] == ('"image content cannot be carried as text; left a placeholder", '
                                                '"document content cannot be carried as text; left a placeholder"')
    r = gw.client.post(OPENAI, json={"model": "m", "messages": OK_MESSAGES})
    assert r.status_code == 200 and "x-cardloop-warnings" not in r.headers  # nothing changed, nothing said


def test_the_warnings_header_is_printable_ascii_and_bounded(gw: Gateway) -> None:
    """Warnings quote the caller's own words (an unknown block type): the header stays one line
    of printable ASCII, an RFC 8941 list of strings, at most 1,024 characters, the rest counted.
    Written raw, "\u2603" could not even be encoded as a header (a 500), and a long type would
    pass what proxies take."""
    odd = {"type": '\u2603 snow\u00e9 "quoted" back\\slash', "x": "1"}
    long = [{"type": f"custom-{n}-" + "z" * 300, "x": "1"} for n in range(30)]
    r = gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 50, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, odd, *long]}]})
    assert r.status_code == 200, r.text
    raw = dict(r.headers.raw)[b"x-cardloop-warnings"]
    assert len(raw) <= 1024 and all(0x20 <= byte <= 0x7E for byte in raw)
    # sf-strings, comma separated; inside one, \" and \\ are the only escapes.
    items = [re.sub(r"\\(.)", r"\1", item) for item in re.findall(r'"((?:[^"\\]|\\.)*)"', raw.decode())]
    # The type's repr (its backslash doubled), non-ASCII written as Python escapes.
    assert items[0] == r"""unknown content block type '\u2603 snow\xe9 "quoted" back\\slash' kept as text"""
    assert items[1].startswith("unknown content block type 'custom-0-zzz") and items[1].endswith("...")
    assert len(items[1]) <= 200
    assert re.fullmatch(r"and \d+ more", items[-1]) and len(items) < 31


# --- streaming -----------------------------------------------------------------------------


def sse_data(text: str) -> list[str]:
    return [line.removeprefix("data: ") for line in text.split("\n") if line.startswith("data: ")]


def anthropic_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        events.append((lines["event"], data))
    return events


LONG_REPLY = "The quick brown fox jumps over the lazy dog. " * 6 + "Done."


def test_openai_streaming(gw: Gateway) -> None:
    reply(gw.model, LONG_REPLY)
    r = gw.client.post(OPENAI, json={"model": "my-label", "stream": True, "stream_options": {"include_usage": True},
                                     "messages": [{"role": "user", "content": "tell me"}]})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    data = sse_data(r.text)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1 and {c["model"] for c in chunks} == {"my-label"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    with_choices = [c for c in chunks if c["choices"]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in with_choices) == LONG_REPLY
    assert len(with_choices) > 4  # really chunked
    assert with_choices[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in with_choices[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    # Without stream_options.include_usage there is no usage chunk.
    reply(gw.model, "short")
    r = gw.client.post(OPENAI, json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    chunks = [json.loads(d) for d in sse_data(r.text)[:-1]]
    assert all(c["choices"] and "usage" not in c for c in chunks)


def test_anthropic_streaming(gw: Gateway) -> None:
    reply(gw.model, LONG_REPLY)
    r = gw.client.post(ANTHROPIC, json={"model": "my-label", "max_tokens": 500, "stream": True,
                                        "messages": [{"role": "user", "content": "tell me"}]})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = anthropic_events(r.text)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"} and len(names[3:-3]) > 4
    start = events[0][1]["message"]
    assert start["model"] == "my-label" and start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    text = "".join(e["delta"]["text"] for name, e in events if name == "content_block_delta")
    assert text == LONG_REPLY
    assert all(e["delta"]["type"] == "text_delta" for name, e in events if name == "content_block_delta")
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 0


def test_text_chunks_rejoin_exactly() -> None:
    for text in ["", "a", "word " * 40, "x" * 130, "  lead and trail  ", "new\nlines\n\nkept " * 9]:
        chunks = text_chunks(text, 16)
        assert "".join(chunks) == text
        assert all(0 < len(c) <= 16 for c in chunks)


# --- provider failures ---------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_overloaded_provider_is_503_with_retry_after(gw: Gateway, path: str) -> None:
    gw.model.inject(529, retry_after=7)
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    if path == OPENAI:
        assert assert_openai_error(r, 503)["type"] == "server_error"
    else:
        assert assert_anthropic_error(r, 503)["type"] == "overloaded_error"
    assert r.headers["retry-after"] == "7"
    assert gw.model.request_count == 1  # no retries of our own: the caller's client owns them
    # Unknown wait: still 503, without a retry-after header.
    gw.model.inject(529)
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 503 and "retry-after" not in r.headers


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_rate_limited_provider_is_429_with_retry_after(gw: Gateway, path: str) -> None:
    gw.model.inject(429, retry_after=2.5)
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    error = assert_openai_error(r, 429) if path == OPENAI else assert_anthropic_error(r, 429)
    assert error["type"] == "rate_limit_error"
    assert r.headers["retry-after"] == "3"  # whole seconds, rounded up


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_provider_400_is_400_with_its_message(gw: Gateway, path: str) -> None:
    gw.model.inject(400, message="messages.0.content: something the provider dislikes")
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    error = assert_openai_error(r, 400) if path == OPENAI else assert_anthropic_error(r, 400)
    assert "something the provider dislikes" in error["message"]
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_our_provider_key_refused_is_502_and_never_echoed(gw: Gateway, path: str) -> None:
    gw.model.inject(401, message=f"invalid x-api-key {API_KEY}")
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 502
    assert API_KEY not in r.text and API_KEY[:16] not in r.text and "x-api-key" not in r.text
    assert "auth" in r.text


# --- malformed requests --------------------------------------------------------------------

OK_MESSAGES = [{"role": "user", "content": "hi"}]
MALFORMED: list[tuple[str, Any]] = [
    ("not json", b"{nope"),
    ("not utf-8", b"\xff\xfe{}"),
    ("NaN", b'{"max_tokens": 10, "temperature": NaN, "messages": [{"role": "user", "content": "hi"}]}'),
    ("array body", [OK_MESSAGES]),
    ("no messages", {"model": "m", "max_tokens": 10}),
    ("messages not a list", {"max_tokens": 10, "messages": {"role": "user", "content": "hi"}}),
    ("empty messages", {"max_tokens": 10, "messages": []}),
    ("message not an object", {"max_tokens": 10, "messages": ["hi"]}),
    ("bad role", {"max_tokens": 10, "messages": [{"role": "wizard", "content": "hi"}]}),
    ("no role", {"max_tokens": 10, "messages": [{"content": "hi"}]}),
    ("content a number", {"max_tokens": 10, "messages": [{"role": "user", "content": 42}]}),
    ("content part without type", {"max_tokens": 10, "messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
    ("model a number", {"model": 4, "max_tokens": 10, "messages": OK_MESSAGES}),
    ("max_tokens zero", {"max_tokens": 0, "messages": OK_MESSAGES}),
    ("max_tokens a string", {"max_tokens": "10", "messages": OK_MESSAGES}),
    ("max_tokens a bool", {"max_tokens": True, "messages": OK_MESSAGES}),
    ("temperature a string", {"max_tokens": 10, "temperature": "hot", "messages": OK_MESSAGES}),
    ("temperature too high", {"max_tokens": 10, "temperature": 9, "messages": OK_MESSAGES}),
    ("stream a string", {"max_tokens": 10, "stream": "yes", "messages": OK_MESSAGES}),
    ("only system text", {"max_tokens": 10, "messages": [{"role": "system", "content": "rules"}]}),
]


def _post_raw(client: TestClient, path: str, body: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=content, headers={"content-type": "application/json"})


@pytest.mark.parametrize(("why", "body"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_openai_body_is_400_in_openai_shape(gw: Gateway, why: str, body: Any) -> None:
    error = assert_openai_error(_post_raw(gw.client, OPENAI, body), 400)
    assert error["type"] == "invalid_request_error"
    assert gw.model.request_count == 0


ANTHROPIC_ONLY: list[tuple[str, Any]] = [
    ("no max_tokens", {"model": "m", "messages": OK_MESSAGES}),
    ("system role message", {"max_tokens": 10, "messages": [{"role": "system", "content": "x"}, *OK_MESSAGES]}),
    ("system a number", {"max_tokens": 10, "system": 3, "messages": OK_MESSAGES}),
    ("system block not text", {"max_tokens": 10, "system": [{"type": "image"}], "messages": OK_MESSAGES}),
    ("temperature above 1", {"max_tokens": 10, "temperature": 1.5, "messages": OK_MESSAGES}),
    ("assistant content null", {"max_tokens": 10, "messages": [*OK_MESSAGES, {"role": "assistant", "content": None}]}),
]


@pytest.mark.parametrize(("why", "body"), MALFORMED[:-1] + ANTHROPIC_ONLY,
                         ids=[m[0] for m in MALFORMED[:-1] + ANTHROPIC_ONLY])
def test_malformed_anthropic_body_is_400_in_anthropic_shape(gw: Gateway, why: str, body: Any) -> None:
    error = assert_anthropic_error(_post_raw(gw.client, ANTHROPIC, body), 400)
    assert error["type"] == "invalid_request_error"
    assert gw.model.request_count == 0


USER_HI = {"role": "user", "content": "hi"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


def _assistant(**fields: Any) -> list[dict[str, Any]]:
    return [USER_HI, {"role": "assistant", "content": None, **fields}]


TOOL_USE = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}
# Content parts and tool calls the gateway cannot read as the caller meant: (route, messages,
# the param the 400 names, what it says). Before, each was accepted and altered ("[text]",
# "[tool_call  id=a]") or forwarded for the provider to refuse, and counted against the limits.
MALFORMED_PARTS = [
    pytest.param(OPENAI, _user({"type": "text", "text": 5}), "messages.0.content.0.text", "must be a string",
                 id="openai text a number"),
    pytest.param(OPENAI, _user({"type": "text", "text": None}), "messages.0.content.0.text", "must be a string",
                 id="openai text null"),
    pytest.param(OPENAI, _user({"type": "text"}), "messages.0.content.0.text", "field required",
                 id="openai text missing"),
    pytest.param(OPENAI, _user({"type": "text", "text": "ok"}, {"type": "text", "text": ["x"]}),
                 "messages.0.content.1.text", "must be a string", id="openai second part's text a list"),
    pytest.param(OPENAI, _user({"type": "image_url", "image_url": {}}), "messages.0.content.0.image_url.url",
                 "field required", id="openai image_url without url"),
    pytest.param(OPENAI, _assistant(tool_calls=[{"id": "a", "type": "function"}]), "messages.1.tool_calls.0.function",
                 "field required", id="openai tool call without function"),
    pytest.param(OPENAI, _assistant(tool_calls="nope"), "messages.1.tool_calls", "must be a list of tool calls",
                 id="openai tool_calls a string"),
    pytest.param(OPENAI, _assistant(tool_calls=["nope"]), "messages.1.tool_calls.0", "must be an object",
                 id="openai tool call a string"),
    pytest.param(OPENAI, _assistant(tool_calls=[{**CALL, "function": {"name": "lookup"}}]),
                 "messages.1.tool_calls.0.function.arguments", "field required",
                 id="openai function without arguments"),
    pytest.param(OPENAI, _assistant(tool_calls=[CALL, {**CALL, "type": "custom"}]), "messages.1.tool_calls.1.type",
                 "must be 'function'", id="openai custom tool call"),
    pytest.param(OPENAI, [{**USER_HI, "tool_calls": [CALL]}], "messages.0.tool_calls", "only an assistant message",
                 id="openai tool_calls on a user message"),
    pytest.param(OPENAI, _assistant(function_call={"arguments": "{}"}), "messages.1.function_call.name",
                 "field required", id="openai function_call without name"),
    pytest.param(ANTHROPIC, _user({"type": "text", "text": 5}), "messages.0.content.0.text", "must be a string",
                 id="anthropic text a number"),
    pytest.param(ANTHROPIC, _user({"type": "text", "text": "see"}, {"type": "image"}), "messages.0.content.1.source",
                 "field required", id="anthropic image without source"),
    pytest.param(ANTHROPIC, [USER_HI, {"role": "assistant", "content": [{**TOOL_USE, "input": None}]}],
                 "messages.1.content.0.input", "must be an object", id="anthropic tool_use input null"),
    pytest.param(ANTHROPIC, [USER_HI, {"role": "assistant", "content": [TOOL_USE]},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                           "content": [{"type": "text"}]}]}],
                 "messages.2.content.0.content.0.text", "field required", id="anthropic tool_result's text missing"),
]


@pytest.mark.parametrize(("path", "messages", "param", "says"), MALFORMED_PARTS)
def test_a_malformed_content_part_or_tool_call_is_400_naming_it_before_any_call(
        gw: Gateway, path: str, messages: list[Any], param: str, says: str) -> None:
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": messages})
    error = assert_openai_error(r, 400) if path == OPENAI else assert_anthropic_error(r, 400)
    assert error["message"].startswith(f"{param}: {says}")
    if path == OPENAI:
        assert (error["param"], error["code"]) == (param, "invalid_request")
    assert gw.model.request_count == 0
    assert gw.store.ledger("acme/gateway/-") == []  # no call made, none counted against the limits


def test_missing_max_tokens_message_names_the_field(gw: Gateway) -> None:
    r = gw.client.post(ANTHROPIC, json={"model": "m", "messages": OK_MESSAGES})
    assert assert_anthropic_error(r, 400)["message"] == "max_tokens: Field required"


def test_openai_n_other_than_one_is_refused(gw: Gateway) -> None:
    r = gw.client.post(OPENAI, json={"model": "m", "n": 2, "messages": OK_MESSAGES})
    assert assert_openai_error(r, 400)["param"] == "n"


def test_oversized_body_is_413_in_the_callers_shape(gw: Gateway) -> None:
    big = "x" * (gw.app.state.services.config.api.max_body_bytes + 1)
    r = gw.client.post(ANTHROPIC, json={"max_tokens": 10, "messages": [{"role": "user", "content": big}]})
    assert assert_anthropic_error(r, 413)["type"] == "request_too_large"


def test_oversized_body_through_the_whole_app_is_413_in_the_callers_shape(tmp_path: Path,
                                                                          model: ScriptedModel) -> None:
    """The app's body limit (api.max_body_bytes, 1 MiB) answers a gateway route in its caller's
    shape, whether the body declares its length or arrives chunked; other routes keep {"detail"}.
    Before, every route got {"detail": ...}, which neither SDK reads as an error of its API."""
    store = TenantStore.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    assert isinstance(store, TenantStore)
    store.tokens, store.prompt = {"tok-acme": "acme"}, None
    app = build_full_app(tmp_path, store=store, base_urls={"claude": model.url})
    limit = app.state.services.config.api.max_body_bytes
    big = json.dumps({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * limit}]})

    def chunked() -> Iterator[bytes]:  # no content-length: the limit counts the bytes as they come
        for at in range(0, len(big), 65536):
            yield big[at:at + 65536].encode()

    try:
        with TestClient(app, headers={"authorization": "Bearer tok-acme"}) as client:
            r = client.post(ANTHROPIC, content=big, headers={"content-type": "application/json"})
            error = assert_anthropic_error(r, 413)
            assert error["type"] == "request_too_large" and f"{limit:,} bytes" in error["message"]
            for body in (big, chunked()):
                error = assert_openai_error(client.post(OPENAI, content=body), 413)
                assert (error["type"], error["code"]) == ("invalid_request_error", "too_large")
            r = client.post(ANTHROPIC, content=chunked())
            assert assert_anthropic_error(r, 413)["type"] == "request_too_large"
            # Another route: the app's own shape, as before (webhooks: theirs, {"status", "detail"}).
            r = client.put("/tenants/acme/prompt", content=big)
            assert r.status_code == 413 and set(r.json()) == {"detail"}
            r = client.post("/webhooks/generic", content=big)
            assert r.status_code == 413 and r.json()["status"] == "refused"
        assert model.request_count == 0
    finally:
        close_app(app)


# --- usage, auth ---------------------------------------------------------------------------


def test_usage_and_cost_are_recorded_per_tenant(gw: Gateway) -> None:
    r1 = gw.client.post(OPENAI, json={"model": "m", "messages": OK_MESSAGES}).json()
    r2 = gw.client.post(ANTHROPIC, json={"model": "m", "max_tokens": 50, "messages": OK_MESSAGES}).json()
    totals = gw.store.usage_totals("acme/gateway/-")
    assert totals.total.calls == 2 and set(totals.by_stage) == {"gateway"}
    assert totals.total.output_tokens == r1["usage"]["completion_tokens"] + r2["usage"]["output_tokens"]
    assert totals.total.input_tokens + totals.total.cache_read_tokens + totals.total.cache_write_tokens == (
        r1["usage"]["prompt_tokens"] + r2["usage"]["input_tokens"] + r2["usage"]["cache_read_input_tokens"]
        + r2["usage"]["cache_creation_input_tokens"])
    assert totals.total.cost_usd > 0  # claude-sonnet-4-6 has a price in config.toml
    # A failed call costs nothing; its attempt is in the ledger as failed (it counts against a
    # requests_per_minute limit: it reached the provider).
    gw.model.inject(529)
    gw.client.post(OPENAI, json={"model": "m", "messages": OK_MESSAGES})
    after = gw.store.usage_totals("acme/gateway/-")
    assert after.total.calls == 3 and after.total.cost_usd == totals.total.cost_usd
    assert sorted(r.status for r in gw.store.ledger("acme/gateway/-")) == ["done", "done", "failed"]


def test_real_require_tenant_with_token_store(tenant_gw: Gateway) -> None:
    r = tenant_gw.client.post(OPENAI, json={"model": "m", "messages": OK_MESSAGES})
    assert r.status_code == 200, r.text
    assert tenant_gw.store.usage_totals("acme/gateway/-").total.calls == 1
    for headers in ({"authorization": "Bearer nope"}, {"authorization": ""}, {"authorization": "Basic tok-acme"}):
        r = tenant_gw.client.post(OPENAI, json={"model": "m", "messages": OK_MESSAGES}, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert tenant_gw.model.request_count == 1


def test_no_bearer_token_is_401_without_override(tmp_path: Path, model: ScriptedModel) -> None:
    # A plain Store (no tenant_for_token yet): without a token the lookup is never reached.
    store = Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    app = build_app(tmp_path, store=store, base_urls={"claude": model.url}, override=False)
    try:
        with TestClient(app) as client:
            for path in (OPENAI, ANTHROPIC):
                r = client.post(path, json={"model": "m", "max_tokens": 5, "messages": OK_MESSAGES})
                assert r.status_code == 401
        assert model.request_count == 0
    finally:
        close_app(app)


# --- an OpenAI-compatible provider behind the gateway ----------------------------------------


class OpenAIServer:
    """A loopback OpenAI-compatible /v1/chat/completions: answers from a queue, records requests."""

    def __init__(self) -> None:
        self.answers: deque[dict[str, Any]] = deque()
        self.received: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.received.append(json.loads(raw))
                data = json.dumps(outer.answers.popleft()).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_openai_provider_profile_gets_openai_format(tmp_path: Path) -> None:
    server = OpenAIServer()
    server.answers.append({
        "id": "chatcmpl-up", "object": "chat.completion", "model": "qwen2.5-coder-32b-instruct",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "cut sho"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
                  "prompt_tokens_details": {"cached_tokens": 100}}})
    store = Store.open(f"sqlite:///{tmp_path / 'gateway.sqlite'}")
    app = build_app(tmp_path, store=store, env={"CARDLOOP_GATEWAY__PROFILE": "local"},
                    base_urls={"local": server.url})
    try:
        with TestClient(app) as client:
            r = client.post(ANTHROPIC, json={"model": "caller", "max_tokens": 100_000, "system": "Be kind.",
                                             "messages": [{"role": "user", "content": f"hi {GITHUB_TOKEN}"}]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["stop_reason"] == "max_tokens" and body["content"] == [{"type": "text", "text": "cut sho"}]
        assert body["usage"] == {"input_tokens": 20, "output_tokens": 7, "cache_read_input_tokens": 100,
                                 "cache_creation_input_tokens": 0}
        sent = server.received[-1]
        assert sent["model"] == "qwen2.5-coder-32b-instruct" and sent["max_tokens"] == 4096
        assert sent["messages"][0]["role"] == "system"
        # profiles.local has no system prompt, but the request layer is there anyway.
        assert sent["messages"][0]["content"] == GUARDRAILS + "\n\nBe kind."
        assert sent["messages"][1]["role"] == "user" and GITHUB_TOKEN not in sent["messages"][1]["content"]
        totals = store.usage_totals("acme/gateway/-")
        assert totals.total.calls == 1 and totals.total.cache_read_tokens == 100
    finally:
        close_app(app)
        server.close()


# --- the real Anthropic SDK against the gateway over HTTP ------------------------------------


@pytest.fixture
def served(tenant_gw: Gateway) -> Iterator[str]:
    """The gateway app on a real loopback port (uvicorn), for clients that bring their own HTTP stack."""
    with serve(tenant_gw.app) as url:
        yield url


def test_the_anthropic_sdk_reads_our_messages_and_our_stream(served: str, tenant_gw: Gateway) -> None:
    client = anthropic.Anthropic(auth_token="tok-acme", base_url=served, max_retries=0)
    try:
        reply(tenant_gw.model, "plain answer")
        message = client.messages.create(model="any", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        assert message.content[0].text == "plain answer" and message.stop_reason == "end_turn"
        assert message.model == "any"
        reply(tenant_gw.model, LONG_REPLY)
        with client.messages.stream(model="any", max_tokens=200, messages=[{"role": "user", "content": "hi"}]) as s:
            pieces = list(s.text_stream)
            final = s.get_final_message()
        assert "".join(pieces) == LONG_REPLY and len(pieces) > 4
        assert final.content[0].text == LONG_REPLY and final.stop_reason == "end_turn"
        assert final.usage.output_tokens > 0
        tenant_gw.model.inject(529, retry_after=4)
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(model="any", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        assert caught.value.status_code == 503 and caught.value.response.headers["retry-after"] == "4"
        bad = anthropic.Anthropic(auth_token="wrong", base_url=served, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.create(model="any", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        bad.close()
    finally:
        client.close()


# --- real streaming (the anthropic provider streams) -------------------------------------------

# About 24 characters per ScriptedModel delta: five deltas, 0.3 s apart.
SLOW_REPLY = "First words arrive early, then more words follow, and yet more, until the end."


def read_deltas(url: str, path: str, body: dict[str, Any]) -> tuple[list[tuple[float, str]], list[str]]:
    """POST with httpx streaming; (seconds after the request, text) per delta, and every data line."""
    arrived: list[tuple[float, str]] = []
    lines: list[str] = []
    t0 = time.monotonic()
    with httpx.stream("POST", url + path, json=body, headers={"authorization": "Bearer tok-acme"},
                      timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            lines.append(line.removeprefix("data: "))
            data = json.loads(lines[-1]) if lines[-1] != "[DONE]" else {}
            text = (data["delta"].get("text") if data.get("type") == "content_block_delta"
                    else (data.get("choices") or [{}])[0].get("delta", {}).get("content"))
            if text:
                arrived.append((time.monotonic() - t0, text))
    return arrived, lines


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_streaming_forwards_deltas_as_the_provider_produces_them(served: str, tenant_gw: Gateway,
                                                                 path: str) -> None:
    tenant_gw.model.inject(content=[{"type": "text", "text": SLOW_REPLY}], chunk_delay=0.3)
    body = {"model": "label", "max_tokens": 200, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "go"}]}
    if path == ANTHROPIC:
        del body["stream_options"]
    arrived, lines = read_deltas(served, path, body)
    assert "".join(text for _, text in arrived) == SLOW_REPLY and len(arrived) >= 3
    # The first delta left long before the provider finished: the stream is not replayed.
    assert arrived[-1][0] - arrived[0][0] >= 0.3 * (len(arrived) - 1) - 0.1
    assert arrived[0][0] < arrived[-1][0] - 0.5
    assert tenant_gw.model.last_request["stream"] is True
    totals = tenant_gw.store.usage_totals("acme/gateway/-").total
    assert totals.calls == 1 and totals.output_tokens > 0 and totals.input_tokens > 0
    if path == OPENAI:
        assert lines[-1] == "[DONE]" and json.loads(lines[-2])["usage"]["completion_tokens"] == totals.output_tokens
    else:
        final = json.loads(lines[-2])
        assert final["type"] == "message_delta" and final["usage"]["output_tokens"] == totals.output_tokens


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_overloaded_provider_before_a_real_stream_is_503(gw: Gateway, path: str) -> None:
    gw.model.inject(529, retry_after=7)
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "stream": True,
                                   "messages": [{"role": "user", "content": "x"}]})
    if path == OPENAI:
        assert assert_openai_error(r, 503)["type"] == "server_error"
    else:
        assert assert_anthropic_error(r, 503)["type"] == "overloaded_error"
    assert r.headers["retry-after"] == "7"
    # The attempt is in the ledger as failed, at no cost.
    assert [(r.status, r.cost_usd) for r in gw.store.ledger("acme/gateway/-")] == [("failed", 0)]


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_provider_lost_mid_stream_ends_with_an_error_event(served: str, tenant_gw: Gateway, path: str) -> None:
    tenant_gw.model.inject(content=[{"type": "text", "text": SLOW_REPLY}], chunk_delay=0.3)
    body = {"model": "m", "max_tokens": 200, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    lines: list[str] = []
    with httpx.stream("POST", served + path, json=body, headers={"authorization": "Bearer tok-acme"},
                      timeout=10) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
            if "First words" in line:
                tenant_gw.model.stop()  # the provider's connection drops between two deltas
    if path == OPENAI:
        error = json.loads(lines[-1].removeprefix("data: ") if lines[-1] else lines[-2].removeprefix("data: "))
        assert error["error"]["type"] == "server_error" and "[DONE]" not in "\n".join(lines)
    else:
        events = [line for line in lines if line.startswith("event: ")]
        assert events[-1] == "event: error" and "message_stop" not in "\n".join(lines)
    # The attempt is in the ledger as failed, with the usage the stream reported before it broke
    # (the input from its start, the output forwarded): the provider bills what it processed.
    [row] = tenant_gw.store.ledger("acme/gateway/-")
    assert row.status == "failed" and row.input_tokens > 0 and row.output_tokens >= 1 and row.cost_usd > 0
    assert "the provider's stream failed (connection)" in (row.note or "")


@pytest.mark.parametrize(("path", "messages", "where"), [
    (OPENAI, [{"role": "user", "content": ""}], "messages.0.content"),
    (OPENAI, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
              {"role": "assistant", "content": "Hello."}, {"role": "user", "content": " \n "}], "messages.3.content"),
    (OPENAI, [{"role": "user", "content": [{"type": "text", "text": "  "}]}], "messages.0.content"),
    (ANTHROPIC, [{"role": "user", "content": [{"type": "text", "text": ""}]}], "messages.0.content"),
])
def test_a_message_without_text_is_400_before_the_provider_is_called(gw: Gateway, path: str,
                                                                     messages: list[Any], where: str) -> None:
    """Anthropic refuses an empty text block: refused here, so no call is made or counted."""
    before = gw.model.request_count
    r = gw.client.post(path, json={"model": "m", "max_tokens": 10, "messages": messages})
    error = assert_openai_error(r, 400) if path == OPENAI else assert_anthropic_error(r, 400)
    assert error["message"].startswith(f"{where}: a message has no text, and the gateway's model (anthropic)")
    assert "nothing was sent" in error["message"]
    if path == OPENAI:
        assert error["param"] == where
    assert gw.model.request_count == before
    # An image with no text beside it is not blank: intercept leaves a placeholder, and it is sent.
    r = gw.client.post(OPENAI, json={"model": "m", "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]})
    assert r.status_code == 200 and gw.model.request_count == before + 1
