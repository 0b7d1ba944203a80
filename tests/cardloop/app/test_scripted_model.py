"""ScriptedModel on loopback, spoken to over plain HTTP so every byte of the wire format is ours
to check (the real SDK against it is covered in tests/activities/test_providers.py)."""

from __future__ import annotations

import json
import math
import re
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardloop.app.scripted_model import (
    STAGES,
    ScriptedModel,
    TranscriptError,
    load_transcript,
    main,
    normalize_stage,
)
from cardloop.contracts.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = ROOT / "prompts" / "templates"
NEW_API = "2026-10-21"
OLD_API = "2023-06-01"
TRANSCRIPT = {
    "planning": ["Plan.\n\n<promise>COMPLETE</promise>"],
    "coding": ["first coding reply", "second coding reply <promise>COMPLETE</promise>"],
    "code review": ["Findings.\n\n<promise>COMPLETE</promise>"],
    "error_fixing": ["Root cause.\n\n<promise>COMPLETE</promise>"],
}
MESSAGE_KEYS = {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}


_http: httpx.Client | None = None


@pytest.fixture(scope="module", autouse=True)
def _shared_client() -> Iterator[None]:
    # One client for the module: building one per request (an SSL context each) costs ~40 ms.
    global _http
    with httpx.Client() as client:
        _http = client
        yield
    _http = None


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(TRANSCRIPT) as server:
        yield server


def request(stage_heading: str | None = "# Stage: coding", text: str = "Go on.", **fields: Any) -> dict[str, Any]:
    system: list[dict[str, Any]] = [{"type": "text", "text": "# Core guardrails\n\nBe careful."}]
    if stage_heading:
        system.append({"type": "text", "text": f"{stage_heading}\n\nRole: you do the stage's work."})
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 1024, "system": system,
                            "messages": [{"role": "user", "content": text}]}
    body.update(fields)
    return body


def post(server: ScriptedModel, body: Any, *, version: str = NEW_API, key: str | None = "test-key",
         path: str = "/v1/messages", timeout: float = 5.0) -> httpx.Response:
    headers = {"anthropic-version": version, "content-type": "application/json"}
    if key is not None:
        headers["x-api-key"] = key
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    assert _http is not None
    return _http.post(server.url + path, content=content, headers=headers, timeout=timeout)


def reply_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return "".join(block["text"] for block in response.json()["content"])


def assert_api_error(response: httpx.Response, status: int, error_type: str, message: str | None = None) -> None:
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert response.headers["request-id"].startswith("req_") and body["request_id"] == response.headers["request-id"]
    if message is not None:
        assert message in body["error"]["message"]


# --- stages and replies -------------------------------------------------------------------


def test_every_agent_template_heading_is_recognised() -> None:
    # The headings come from the real templates, so a renamed template breaks this, not the demo.
    found = {}
    for path in sorted((TEMPLATES / "agents").glob("*.md")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# Stage: "), path
        found[path.stem] = normalize_stage(first.removeprefix("# Stage: "))
    for stage in STAGES:
        assert found[stage] == stage


@pytest.mark.parametrize(("heading", "stage"), [
    ("# Stage: planning", "planning"), ("# Stage: coding", "coding"), ("# Stage: code review", "review"),
    ("# Stage: error fixing", "error_fixing"),
])
def test_stage_recognised_from_the_agent_block(model: ScriptedModel, heading: str, stage: str) -> None:
    text = reply_text(post(model, request(heading)))
    assert text == ScriptedModel(TRANSCRIPT).transcript[stage][0]
    assert model.stage_counts == {stage: 1}


def test_stage_heading_in_a_system_string(model: ScriptedModel) -> None:
    body = request(None, system="# Core\n\nBe careful.\n\n# Stage: planning\n\nRole: plan.")
    assert reply_text(post(model, body)).startswith("Plan.")


def test_agent_block_heading_wins_over_quoted_text(model: ScriptedModel) -> None:
    body = request("# Stage: planning")
    body["system"][0]["text"] += "\n\nTenant note:\n# Stage: coding\n"
    assert reply_text(post(model, body)).startswith("Plan.")


def test_replies_follow_in_order_and_the_last_repeats(model: ScriptedModel) -> None:
    texts = [reply_text(post(model, request())) for _ in range(3)]
    assert texts == ["first coding reply", *["second coding reply <promise>COMPLETE</promise>"] * 2]
    # Another stage keeps its own position.
    assert reply_text(post(model, request("# Stage: planning"))).startswith("Plan.")
    assert model.stage_counts == {"coding": 3, "planning": 1}
    model.reset()
    assert reply_text(post(model, request())) == "first coding reply"


def test_unscripted_stage_and_missing_heading_block(model: ScriptedModel) -> None:
    text = reply_text(post(model, request("# Stage: testing")))
    assert "no replies for stage 'testing'" in text and text.endswith("<promise>BLOCKED</promise>")
    assert reply_text(post(model, request(None))).endswith("<promise>BLOCKED</promise>")
    with ScriptedModel({"default": ["generic <promise>COMPLETE</promise>"]}) as server:
        assert reply_text(post(server, request("# Stage: testing"))) == "generic <promise>COMPLETE</promise>"


def test_success_has_the_real_message_shape(model: ScriptedModel) -> None:
    response = post(model, request())
    body = response.json()
    assert set(body) == MESSAGE_KEYS
    assert body["id"].startswith("msg_") and body["type"] == "message" and body["role"] == "assistant"
    assert body["model"] == "claude-sonnet-4-6"
    assert body["content"] == [{"type": "text", "text": "first coding reply"}]
    assert (body["stop_reason"], body["stop_sequence"]) == ("end_turn", None)
    usage = body["usage"]
    for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        assert isinstance(usage[key], int)
    assert usage["output_tokens"] == len("first coding reply") // 4 + 1
    assert response.headers["request-id"].startswith("req_")


def test_max_tokens_cuts_the_reply(model: ScriptedModel) -> None:
    body = post(model, request(max_tokens=2)).json()
    assert body["stop_reason"] == "max_tokens"
    assert body["content"][0]["text"] == "first co"
    assert body["usage"]["output_tokens"] == 2


def test_prompt_cache_usage() -> None:
    core = {"type": "text", "text": "x" * 8000, "cache_control": {"type": "ephemeral"}}
    agent = {"type": "text", "text": "# Stage: coding\n\n" + "y" * 400, "cache_control": {"type": "ephemeral"}}
    with ScriptedModel(TRANSCRIPT) as server:
        first = post(server, request(system=[core, agent])).json()["usage"]
        second = post(server, request(system=[core, agent], text="Another turn.")).json()["usage"]
        other_stage = {**agent, "text": "# Stage: planning\n\n" + "z" * 400}
        third = post(server, request(system=[core, other_stage])).json()["usage"]
        uncached = post(server, request()).json()["usage"]
    assert (first["cache_read_input_tokens"], first["cache_creation_input_tokens"]) == (0, 2000 + 105)
    assert (second["cache_read_input_tokens"], second["cache_creation_input_tokens"]) == (2105, 0)
    # Same core, new agent block: the core is read, the agent block written.
    assert (third["cache_read_input_tokens"], third["cache_creation_input_tokens"]) == (2000, 105)
    # Below min_cache_tokens nothing is cached, as with the real API.
    assert (uncached["cache_read_input_tokens"], uncached["cache_creation_input_tokens"]) == (0, 0)
    assert first["input_tokens"] == 2  # "Go on." after the cached prefix


def test_moving_a_breakpoint_does_not_change_the_prefix() -> None:
    """Anthropic caches content, not where the markers sat: a turn whose earlier blocks lost their
    markers (a tool result here) still reads the prefix the previous turn wrote at a later one."""
    mark = {"cache_control": {"type": "ephemeral"}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x" * 8000}
    context = {"type": "text", "text": "Notes: " + "y" * 400}
    opening = [{"role": "user", "content": [{"type": "text", "text": "Fix it."}]},
               {"role": "assistant", "content": [call]}]
    first = [*opening, {"role": "user", "content": [{**result, **mark}]},
             {"role": "user", "content": [{**context, **mark}]}, {"role": "user", "content": "Go on."}]
    second = [*opening, {"role": "user", "content": [result]}, {"role": "user", "content": [{**context, **mark}]},
              {"role": "assistant", "content": [{"type": "text", "text": "Done reading.", **mark}]},
              {"role": "user", "content": "Go on."}]
    with ScriptedModel(TRANSCRIPT) as server:
        wrote = post(server, request(messages=first)).json()["usage"]
        read = post(server, request(messages=second)).json()["usage"]
    assert wrote["cache_creation_input_tokens"] > 2000
    assert read["cache_read_input_tokens"] == wrote["cache_creation_input_tokens"]
    assert read["cache_creation_input_tokens"] == 4  # "Done reading." only


# --- the summarizer -----------------------------------------------------------------------


def test_summary_requests_get_a_deterministic_extractive_summary(model: ScriptedModel) -> None:
    system = (TEMPLATES / "summarize.md").read_text(encoding="utf-8").replace("${max_tokens}", "800")
    messages = [
        {"role": "user", "content": "Please retry failed webhook deliveries with backoff.\nSee ADR-0007."},
        {"role": "assistant", "content": "I read app/webhooks/delivery.py and docs/adr/0007-retries.md."},
        {"role": "user", "content": "Agreed: full jitter, cap before jitter.\nNext: the dispatcher."},
        {"role": "assistant", "content": "CI failed: TypeError in app/webhooks/retry.py line 56.\n"
                                         "Still open: the staging crash."},
    ]
    body = request(None, system=system, messages=messages)
    first, second = reply_text(post(model, body)), reply_text(post(model, body))
    assert first == second
    headings = re.findall(r"^## (\w+)$", first, re.MULTILINE)
    assert headings == ["Requested", "Decisions", "Errors", "Code", "State", "Remaining"]
    assert "- Please retry failed webhook deliveries with backoff." in first
    assert "- Agreed: full jitter, cap before jitter." in first
    assert "CI failed: TypeError in app/webhooks/retry.py line 56." in first
    assert "app/webhooks/delivery.py, docs/adr/0007-retries.md, app/webhooks/retry.py" in first
    assert "## State\n- CI failed" in first
    assert "Still open: the staging crash." in first
    assert model.stage_counts == {}  # summaries do not use up stage replies


def test_summary_of_nothing_says_none(model: ScriptedModel) -> None:
    body = request(None, system="# Summarize a card's conversation\n\nSummarize.", text="ok")
    text = reply_text(post(model, body))
    assert "## Errors\nnone" in text and "## Requested\n- ok" in text


# --- validation like the API's ------------------------------------------------------------


def _five_cache_blocks() -> dict[str, Any]:
    block = {"type": "text", "text": "cached", "cache_control": {"type": "ephemeral"}}
    return request(system=[dict(block) for _ in range(3)],
                   messages=[{"role": "user", "content": [dict(block), dict(block)]}])


@pytest.mark.parametrize(("body", "message"), [
    (request(messages=[{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Go"}]),
     'messages: first message must use the "user" role'),
    (_five_cache_blocks(), "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens: Field required"),
    (request(max_tokens=0), "max_tokens: Input should be greater than or equal to 1"),
    (request(max_tokens="10"), "max_tokens: Input should be a valid integer"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, "model: Field required"),
    (request(messages=[]), "messages: at least one message is required"),
    (request(messages=[{"role": "system", "content": "hi"}]), "messages.0.role: Input should be 'user' or"),
    (request(messages=[{"role": "user", "content": ""}]), "messages.0: all messages must have non-empty content"),
    (request(messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}]),
     "messages.0.content.0: text content blocks must be non-empty"),
    (request(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure, "}]),
     "final assistant content cannot end with trailing whitespace"),
    (request(system=7), "system: Input should be a valid string or a list of text blocks"),
    (request(system=[{"type": "image", "source": {}}]), "system.0.type: Input should be 'text'"),
    (request(system=[{"type": "text", "text": "x", "cache_control": {"type": "persistent"}}]),
     "system.0.cache_control.type: Input should be 'ephemeral'"),
    (request(temperature=0.2), "temperature: Extra inputs are not permitted"),
    (request(max_completion_tokens=10), "max_completion_tokens: Extra inputs are not permitted"),
    (request(stream="yes"), "stream: Input should be a valid boolean"),
])
def test_invalid_requests_get_the_apis_400(model: ScriptedModel, body: dict[str, Any], message: str) -> None:
    response = post(model, body)
    assert_api_error(response, 400, "invalid_request_error", message)
    assert model.stage_counts == {}


def test_temperature_is_valid_before_api_2026_10_21(model: ScriptedModel) -> None:
    assert reply_text(post(model, request(temperature=0.2), version=OLD_API)) == "first coding reply"
    response = post(model, request(temperature=1.5), version=OLD_API)
    assert_api_error(response, 400, "invalid_request_error", "temperature: Input should be greater than")


def test_headers_and_body_are_checked(model: ScriptedModel) -> None:
    assert_api_error(post(model, request(), key=None), 401, "authentication_error", "x-api-key header is required")
    assert_api_error(post(model, request(), version=""), 400, "invalid_request_error", "anthropic-version")
    assert_api_error(post(model, b"{not json"), 400, "invalid_request_error", "error parsing the body")
    assert_api_error(post(model, request(), path="/v1/complete"), 404, "not_found_error")
    with ScriptedModel(TRANSCRIPT, api_key="right") as strict:
        assert_api_error(post(strict, request(), key="wrong"), 401, "authentication_error", "invalid x-api-key")
        bearer = httpx.post(strict.url + "/v1/messages", json=request(), timeout=5,
                            headers={"authorization": "Bearer right", "anthropic-version": NEW_API})
        assert bearer.status_code == 200


# --- faults -------------------------------------------------------------------------------


def test_faults_are_consumed_one_per_request_before_replies(model: ScriptedModel) -> None:
    model.inject(status=529)
    model.inject(status=429, retry_after=1)
    model.inject(status=400, message="messages.0: nope")
    model.inject(status=429, error_type="rate_limit_error", message="You have reached your spend limit")
    assert model.pending_faults == 4
    overloaded = post(model, request())
    assert_api_error(overloaded, 529, "overloaded_error", "Overloaded")
    limited = post(model, request())
    assert_api_error(limited, 429, "rate_limit_error")
    assert limited.headers["retry-after"] == "1"
    assert_api_error(post(model, request()), 400, "invalid_request_error", "messages.0: nope")
    assert_api_error(post(model, request()), 429, "rate_limit_error", "You have reached your spend limit")
    # Faults do not use up replies: the stage starts at its first reply.
    assert reply_text(post(model, request())) == "first coding reply"
    assert model.request_count == 5 and model.pending_faults == 0


def test_fault_repeats_and_extra_headers(model: ScriptedModel) -> None:
    model.inject(status=503, times=2, headers={"x-test": "yes"})
    assert [post(model, request()).status_code for _ in range(3)] == [503, 503, 200]
    model.inject(status=429, headers={"anthropic-ratelimit-tokens-reset": "2030-01-01T00:00:00Z"})
    assert post(model, request()).headers["anthropic-ratelimit-tokens-reset"] == "2030-01-01T00:00:00Z"


def test_delay_outlasts_a_client_timeout(model: ScriptedModel) -> None:
    model.inject(delay=2.0)
    with pytest.raises(httpx.ReadTimeout):
        post(model, request(), timeout=0.2)
    # The server recorded the request it never answered in time; the next one is normal.
    assert model.request_count == 1
    assert reply_text(post(model, request())) == "first coding reply"


def test_inject_rejects_nonsense(model: ScriptedModel) -> None:
    for kwargs in ({"status": 200}, {"status": 302}, {"delay": -1.0}, {"status": 500, "times": 0}):
        with pytest.raises(ValueError):
            model.inject(**kwargs)


# --- recording, lifecycle, concurrency ----------------------------------------------------


def test_requests_are_recorded(model: ScriptedModel) -> None:
    assert model.last_request is None and model.request_count == 0
    post(model, request(text="one"))
    post(model, request(text="two"))
    assert model.request_count == 2
    assert model.last_request["messages"][0]["content"] == "two"
    first = model.requests[0]
    assert (first.method, first.path, first.headers["x-api-key"]) == ("POST", "/v1/messages", "test-key")


def test_lifecycle() -> None:
    server = ScriptedModel(TRANSCRIPT)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
    with server:
        url = server.url
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        with httpx.Client() as client:  # a kept-alive connection must not outlive stop()
            headers = {"x-api-key": "k", "anthropic-version": NEW_API}
            assert client.post(url + "/v1/messages", json=request(), headers=headers).status_code == 200
            server.stop()
            with pytest.raises(httpx.TransportError):
                client.post(url + "/v1/messages", json=request(), headers=headers)
    with pytest.raises(httpx.ConnectError):
        httpx.post(url + "/v1/messages", json=request(), timeout=2)
    server.stop()  # idempotent


def test_stop_does_not_wait_for_a_sleeping_handler() -> None:
    server = ScriptedModel(TRANSCRIPT, latency=30.0).start()
    with socket.create_connection((server.host, server.port)) as conn:
        data = json.dumps(request()).encode()
        conn.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\nanthropic-version: " + NEW_API.encode()
                     + b"\r\ncontent-length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        deadline = time.monotonic() + 5
        while server.request_count == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        server.stop()  # a 30 s sleep would hang the test (pytest-timeout) if stop() waited for it
        conn.settimeout(5)
        assert conn.recv(1024) == b""  # dropped, like a crash


def test_concurrent_requests_each_get_an_answer() -> None:
    with ScriptedModel({"coding": [f"reply {i}" for i in range(40)]}, latency=0.01) as server:
        with ThreadPoolExecutor(max_workers=16) as pool:
            texts = list(pool.map(lambda _: reply_text(post(server, request())), range(40)))
        assert sorted(texts, key=lambda t: int(t.split()[1])) == [f"reply {i}" for i in range(40)]
        assert server.stage_counts == {"coding": 40} and server.request_count == 40


# --- transcripts --------------------------------------------------------------------------


def test_bundled_transcript_tells_the_sample_cards_story() -> None:
    transcript = load_transcript(ROOT / "examples" / "transcript.json")
    assert set(transcript) == set(STAGES)
    assert len(transcript["coding"]) == 2
    assert "<promise>COMPLETE</promise>" not in transcript["coding"][0]
    for stage, replies in transcript.items():
        assert replies[-1].rstrip().endswith("<promise>COMPLETE</promise>"), stage
    assert "| Acceptance criterion |" in transcript["testing"][0]
    for section in ("## Root cause", "## Fix", "## Verification"):
        assert section in transcript["error_fixing"][0]
    card = json.loads((ROOT / "examples" / "card.json").read_text(encoding="utf-8"))
    assert card["repo"] == "acme/payments-api"
    assert "exponential backoff" in card["title"]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "transcript.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "message"), [
    ('{"coding": ["a",]}', "not valid JSON: line 1 column 17: Expecting value"),
    ('["a", "b"]', "must be a JSON object mapping a stage to a list of replies, got list"),
    ('{"deploying": ["a"]}', "unknown stage 'deploying'; expected one of: planning, coding, review"),
    ('{"coding": "just one"}', "stage 'coding': expected a list of reply strings, got str"),
    ('{"coding": []}', "stage 'coding' has no replies"),
    ('{"coding": ["ok", 3]}', "stage 'coding' reply 2: expected a string or a list of content blocks, got int"),
    ('{"coding": [[{"type": "tool_use", "name": "x"}]]}',
     "reply 1 block 1: expected a non-empty text block or a tool_use"),
    ('{"coding": [[]]}', "reply 1: an empty list of content blocks"),
    ('{"coding": ["ok", "  "]}', "stage 'coding' reply 2 is empty"),
    ('{"review": ["a"], "code review": ["b"]}', "stage 'review' is given twice"),
])
def test_bad_transcripts_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert isinstance(info.value, InputError) and isinstance(info.value, ValueError)


def test_transcript_file_errors_and_comments(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="file not found"):
        load_transcript(tmp_path / "missing.json")
    path = write(tmp_path, '{"_about": "comment", "Code-Review": ["r"], "Error fixing": ["e"]}')
    assert load_transcript(path) == {"review": ["r"], "error_fixing": ["e"]}
    with pytest.raises(TranscriptError, match="unknown stage"):
        ScriptedModel({"deploy": ["x"]})


def test_cli_reports_a_bad_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.json")]) == 2
    assert "file not found" in capsys.readouterr().err


# --- streaming ----------------------------------------------------------------------------


def test_streaming_through_the_real_sdk_arrives_in_pieces() -> None:
    import anthropic

    reply = "One two three four five six seven eight nine ten eleven twelve thirteen."
    with ScriptedModel({"coding": [reply]}, chunk_delay=0.2) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        try:
            body = request()
            arrived: list[tuple[float, str]] = []
            t0 = time.monotonic()
            with client.messages.stream(model=body["model"], max_tokens=100, system=body["system"],
                                        messages=body["messages"]) as stream:
                for piece in stream.text_stream:
                    arrived.append((time.monotonic() - t0, piece))
                final = stream.get_final_message()
            assert "".join(p for _, p in arrived) == reply and len(arrived) >= 3
            # The server waits between deltas, so the last cannot arrive sooner than that after the
            # request; and they arrive spread out, not at once (the first one's arrival may lag by a
            # scheduling slice on a loaded machine: CI once measured 0.5495 s for a 0.55 s bound).
            assert arrived[-1][0] >= 0.2 * (len(arrived) - 1)
            assert arrived[-1][0] - arrived[0][0] >= 0.2 * (len(arrived) - 1) - 0.15
            assert final.content[0].text == reply and final.stop_reason == "end_turn"
            assert final.usage.input_tokens > 0 and final.usage.output_tokens == math.ceil(len(reply) / 4)
            assert server.last_request["stream"] is True
            # An injected error is the API's JSON error before any event, not a stream.
            server.inject(529)
            opening = client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
            with pytest.raises(anthropic.InternalServerError) as caught, opening:
                pass
            assert caught.value.status_code == 529 and caught.value.body["error"]["type"] == "overloaded_error"
        finally:
            client.close()


def test_stream_wire_format(model: ScriptedModel) -> None:
    model.inject(chunk_delay=0.0)
    assert _http is not None
    response = _http.post(model.url + "/v1/messages", json=request(stream=True),
                          headers={"anthropic-version": NEW_API, "x-api-key": "k"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = response.text.strip().split("\n\n")
    names = [f.split("\n")[0].removeprefix("event: ") for f in frames]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    data = [json.loads(f.split("\n")[1].removeprefix("data: ")) for f in frames]
    assert [d["type"] for d in data] == names
    assert "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta") == "first coding reply"
    assert data[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert data[-2]["usage"]["output_tokens"] > 0


# --- tool use in the Anthropic wire format ------------------------------------------------------

TOOL = {"name": "read_file", "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}


def test_a_transcript_reply_of_content_blocks_is_a_tool_use_turn() -> None:
    script = {"coding": [[{"type": "text", "text": "Reading the policy."},
                          {"type": "tool_use", "name": "read_file", "input": {"path": "app/webhooks/retry.py"}}],
                         "Fixed.\n\n<promise>COMPLETE</promise>"]}
    with ScriptedModel(script) as server:
        first = post(server, request(tools=[TOOL])).json()
        assert first["stop_reason"] == "tool_use"
        text, use = first["content"]
        assert text == {"type": "text", "text": "Reading the policy."}
        assert use["type"] == "tool_use" and use["id"].startswith("toolu_") and use["name"] == "read_file"
        assert use["input"] == {"path": "app/webhooks/retry.py"}
        answered = request(tools=[TOOL])
        answered["messages"] += [{"role": "assistant", "content": first["content"]},
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                               "content": "1 | import random"}]}]
        second = post(server, answered)
        assert reply_text(second).endswith("<promise>COMPLETE</promise>")
        assert second.json()["stop_reason"] == "end_turn"


@pytest.mark.parametrize(("change", "message"), [
    (lambda b: b.update(tools=[{**TOOL, "name": "read file"}]), "tools.0.custom.name: String should match pattern"),
    (lambda b: b.update(tools=[{"name": "x"}]), "tools.0.custom.input_schema: Field required"),
    (lambda b: b.update(tools=[TOOL, TOOL]), "Tool names must be unique"),
    (lambda b: b["messages"].extend([
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}]},
        {"role": "user", "content": "no result"}]),
     "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1"),
    (lambda b: b["messages"].extend([
        {"role": "assistant", "content": "hm"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}]),
     "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"),
])
def test_tool_rules_get_the_apis_400(model: ScriptedModel, change: Any, message: str) -> None:
    body = request()
    change(body)
    assert_api_error(post(model, body), 400, "invalid_request_error", message)
