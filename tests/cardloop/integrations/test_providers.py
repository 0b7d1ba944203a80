"""Providers against servers on 127.0.0.1 that speak the real wire formats.

Anthropic: the real SDK against ScriptedModel. OpenAI and Gemini: small stdlib servers below
that answer in the chat.completions / generateContent JSON shapes, error bodies included.
"""

from __future__ import annotations

import email.utils
import json
import pickle
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.integrations.providers import (
    AnthropicProvider,
    Completion,
    GeminiProvider,
    OpenAICompatProvider,
    Price,
    Provider,
    TextDelta,
    Usage,
    build_provider,
    classify_status,
    cost_usd,
    retry_after_from,
)
from cardloop.integrations.providers.anthropic import SDK_TAKES_TEMPERATURE
from cardloop.integrations.upstream import MAX_RETRY_AFTER, UpstreamError
from cardloop.prompts.conversation import Conversation, SystemBlock, ToolOutput, ToolSpec, ToolUse, Turn

ROOT = Path(__file__).resolve().parents[3]
API_KEY = "sk-ant-api03-THIS-KEY-MUST-NEVER-BE-PRINTED-0123456789"
# Over the 1,024-token minimum the API (and ScriptedModel) needs before it caches a prefix.
CORE = "# Core guardrails\n\n" + "Work in small verifiable steps and ground every claim in the code. " * 80
CONV = Conversation(
    system=(SystemBlock(CORE, cache=True),
            SystemBlock("# Stage: coding\n\nRole: you implement the card's agreed plan.", cache=True)),
    turns=(Turn("user", "Implement the retry policy from ADR-0007."),),
)
# Not claude-sonnet-4-6 (config.toml's default): SDK 2.x warns that it is deprecated.
MODEL = "claude-sonnet-4-6"
REPLIES = {"coding": ["Migration written; next the policy.", "Done.\n\n<promise>COMPLETE</promise>"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(REPLIES) as server:
        yield server


@pytest.fixture
def claude(model: ScriptedModel) -> Iterator[AnthropicProvider]:
    provider = AnthropicProvider(api_key=API_KEY, base_url=model.url, timeout=5.0)
    yield provider
    provider.close()


def fail(provider: Provider, conv: Conversation = CONV, **kwargs: Any) -> UpstreamError:
    with pytest.raises(UpstreamError) as info:
        provider.complete(conv, model=kwargs.get("model", MODEL), max_tokens=256,
                          temperature=kwargs.get("temperature", 0.2))
    return info.value


def assert_no_key(error: UpstreamError, key: str = API_KEY) -> None:
    for text in (str(error), repr(error), error.message, *map(str, error.args)):
        assert key not in text


# --- Anthropic through the real SDK -------------------------------------------------------


def test_anthropic_success_maps_text_usage_and_cache(claude: AnthropicProvider, model: ScriptedModel) -> None:
    first = claude.complete(CONV, model=MODEL, max_tokens=256, temperature=0.2)
    assert isinstance(claude, Provider)
    assert first.text == REPLIES["coding"][0]
    assert first.stop_reason == "end_turn"
    assert first.model == MODEL
    assert first.response_id is not None and first.response_id.startswith("msg_")
    # The first request writes the cached prefix, the second reads it.
    assert first.usage.cache_write_tokens > 1024
    assert first.usage.cache_read_tokens == 0
    assert 0 < first.usage.input_tokens < 100
    assert first.usage.output_tokens > 0
    second = claude.complete(CONV, model=MODEL, max_tokens=256, temperature=0.2)
    assert second.text.endswith("<promise>COMPLETE</promise>")
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert second.usage.cache_write_tokens == 0
    assert second.usage.total_input_tokens == first.usage.total_input_tokens
    assert model.request_count == 2


def test_anthropic_request_carries_cache_breakpoints_and_no_sdk_retries(
        claude: AnthropicProvider, model: ScriptedModel) -> None:
    claude.complete(CONV, model=MODEL, max_tokens=256, temperature=0.2)
    body = model.last_request
    assert [b.get("cache_control") for b in body["system"]] == [{"type": "ephemeral"}] * 2
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Implement the retry policy from ADR-0007."}]}]
    assert body["max_tokens"] == 256
    headers = model.requests[-1].headers
    assert headers["x-stainless-retry-count"] == "0"
    # SDK 2.x speaks API 2026-10-21, which has no temperature: the provider must not send it.
    assert ("temperature" in body) == SDK_TAKES_TEMPERATURE


def test_anthropic_529_is_retryable_overloaded_and_not_retried_by_the_sdk(
        claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=529)
    error = fail(claude)
    assert (error.kind, error.retryable, error.status) == ("overloaded", True, 529)
    assert "overloaded_error" in error.message and "request-id req_" in error.message
    assert model.request_count == 1  # max_retries=0: Temporal owns retries


def test_anthropic_429_retry_after_seconds(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=429, retry_after=7)
    error = fail(claude)
    assert (error.kind, error.retryable, error.retry_after) == ("rate_limited", True, 7.0)


def test_anthropic_429_retry_after_http_date(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=429, retry_after=email.utils.formatdate(time.time() + 30, usegmt=True))
    error = fail(claude)
    assert error.retryable and error.retry_after is not None and 20 <= error.retry_after <= 31


def test_anthropic_429_ratelimit_reset_headers(claude: AnthropicProvider, model: ScriptedModel) -> None:
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 40))
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 300))
    model.inject(status=429, headers={
        "anthropic-ratelimit-requests-remaining": "12", "anthropic-ratelimit-requests-reset": later,
        "anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": soon,
    })
    error = fail(claude)
    # The exhausted limit (input tokens) decides, not the one with requests to spare.
    assert error.retry_after is not None and 30 <= error.retry_after <= 41


def test_anthropic_retry_after_is_capped(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=529, retry_after=86400)
    assert fail(claude).retry_after == MAX_RETRY_AFTER


def test_anthropic_spend_limit_429_is_final(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=429, error_type="rate_limit_error", message="You have reached your spend limit", retry_after=60)
    error = fail(claude)
    assert (error.kind, error.retryable, error.status) == ("spend_limit", False, 429)
    assert "You have reached your spend limit" in error.message


def test_anthropic_400_is_final_with_the_servers_message(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=400, message="messages.0.content.0.text: field required")
    error = fail(claude)
    assert (error.kind, error.retryable, error.status) == ("invalid_request", False, 400)
    assert "messages.0.content.0.text: field required" in error.message


def test_anthropic_real_validation_error_reaches_the_caller(claude: AnthropicProvider) -> None:
    # A conversation that opens with the assistant: ScriptedModel refuses it as the API does.
    conv = Conversation(system=CONV.system, turns=(Turn("assistant", "Hi"), Turn("user", "Go on.")))
    error = fail(claude, conv)
    assert error.kind == "invalid_request" and not error.retryable
    assert 'first message must use the "user" role' in error.message


def test_anthropic_prompt_too_long_is_too_large(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(status=400, message="prompt is too long: 214023 tokens > 200000 maximum")
    assert fail(claude).kind == "too_large"


def test_anthropic_401_is_auth_and_never_shows_the_key() -> None:
    with ScriptedModel(REPLIES, api_key="the-right-key") as server:
        provider = AnthropicProvider(api_key=API_KEY, base_url=server.url, timeout=5.0)
        error = fail(provider)
    assert (error.kind, error.retryable, error.status) == ("auth", False, 401)
    assert "invalid x-api-key" in error.message
    assert_no_key(error)


@pytest.mark.parametrize(("status", "kind", "retryable"), [
    (402, "spend_limit", False), (403, "auth", False), (404, "not_found", False), (413, "too_large", False),
    (408, "timeout", True), (409, "conflict", True), (500, "server", True), (502, "server", True),
    (503, "server", True), (504, "server", True),
])
def test_anthropic_status_table(claude: AnthropicProvider, model: ScriptedModel, status: int, kind: str,
                                retryable: bool) -> None:
    model.inject(status=status)
    error = fail(claude)
    assert (error.status, error.kind, error.retryable) == (status, kind, retryable)
    assert_no_key(error)


def test_anthropic_delay_beyond_timeout_is_retryable_timeout(model: ScriptedModel) -> None:
    provider = AnthropicProvider(api_key=API_KEY, base_url=model.url, timeout=0.3)
    model.inject(delay=3.0)
    error = fail(provider)
    assert (error.kind, error.retryable, error.status) == ("timeout", True, None)
    # The next call is answered normally: the fault was consumed by the timed-out request.
    assert provider.complete(CONV, model="m", max_tokens=64, temperature=None).text == REPLIES["coding"][0]


def test_anthropic_connection_refused_is_retryable_connection() -> None:
    provider = AnthropicProvider(api_key=API_KEY, base_url=f"http://127.0.0.1:{free_port()}", timeout=2.0)
    error = fail(provider)
    assert (error.kind, error.retryable, error.status) == ("connection", True, None)
    assert_no_key(error)


def test_api_key_never_appears_in_errors_or_reprs(claude: AnthropicProvider, model: ScriptedModel) -> None:
    errors = []
    for status in (400, 401, 403, 429, 500, 529):
        # A careless server could echo the key it was sent: it is scrubbed from our messages.
        model.inject(status=status, message=f"key {API_KEY} rejected")
        errors.append(fail(claude))
    for error in errors:
        assert_no_key(error)
        assert "***" in error.message
        assert_no_key(pickle.loads(pickle.dumps(error)))
    assert API_KEY not in repr(claude)
    assert API_KEY not in repr(build_provider("gemini", api_key=API_KEY, base_url=None))
    assert API_KEY not in repr(build_provider("openai", api_key=API_KEY, base_url=None))


def test_demo_transcript_answers_a_really_assembled_prompt(model: ScriptedModel) -> None:
    # The offline demo path: the sample card's prompt, assembled for real, through the SDK.
    from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
    from cardloop.prompts.card import Card
    from cardloop.prompts.settings import AssemblySettings
    from cardloop.prompts.stages import Stage
    from cardloop.prompts.templates import TemplateStore
    from cardloop.prompts.tokens import TokenCounter

    card = Card.model_validate(json.loads((ROOT / "examples" / "card.json").read_text()))
    transcript = load_transcript(ROOT / "examples" / "transcript.json")
    assembler = PromptAssembler(TemplateStore([]), TokenCounter())
    with ScriptedModel(transcript) as server:
        provider = AnthropicProvider(api_key=API_KEY, base_url=server.url, timeout=10.0)
        for stage in Stage:
            conv = assembler.assemble(AssemblyRequest(card=card, stage=stage), AssemblySettings()).conversation
            done = provider.complete(conv, model=MODEL, max_tokens=8192, temperature=0.2)
            assert done.text == transcript[stage.value][0], stage
            assert done.usage.input_tokens > 1000 and done.usage.output_tokens > 0
        assert server.stage_counts == {s.value: 1 for s in Stage}


# --- classification, shared by every provider ---------------------------------------------


@pytest.mark.parametrize(("status", "message", "code", "kind", "retryable"), [
    (400, "messages: field required", None, "invalid_request", False),
    (400, "Your credit balance is too low to access the Anthropic API.", None, "spend_limit", False),
    (401, "invalid x-api-key", None, "auth", False),
    (403, "permission denied", None, "auth", False),
    (404, "model: claude-nope", None, "not_found", False),
    (413, "Request exceeds the maximum allowed number of bytes.", None, "too_large", False),
    (422, "Unprocessable Entity", None, "invalid_request", False),
    (429, "Rate limit reached", None, "rate_limited", True),
    (429, "Quota exceeded for metric generate_content", None, "spend_limit", False),
    (429, "billing hard limit has been reached", None, "spend_limit", False),
    (429, "whatever", "insufficient_quota", "spend_limit", False),
    (429, "whatever", "enforced_spend_limit_reached", "spend_limit", False),
    (429, "ramp limit", "ramp_limit_exceeded", "rate_limited", True),
    (408, "timeout", None, "timeout", True),
    (409, "conflict", None, "conflict", True),
    (500, "boom", None, "server", True),
    (503, "The model is overloaded.", None, "overloaded", True),
    (529, "Overloaded", None, "overloaded", True),
    (599, "odd", None, "server", True),
])
def test_classify_status_table(status: int, message: str, code: str | None, kind: str, retryable: bool) -> None:
    error = classify_status(status, message, {}, provider="x", code=code)
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)
    assert error.message.startswith(f"x: HTTP {status}: ")
    assert message in error.message


def test_retry_after_sources_and_cap() -> None:
    now = 1_700_000_000.0
    assert retry_after_from({"Retry-After": "7"}, now=now) == 7.0
    assert retry_after_from({"retry-after": "1.5"}, now=now) == 1.5
    assert retry_after_from({"retry-after-ms": "250", "retry-after": "9"}, now=now) == 0.25
    assert retry_after_from({"retry-after": email.utils.formatdate(now + 42, usegmt=True)}, now=now) == 42.0
    assert retry_after_from({"retry-after": email.utils.formatdate(now - 42, usegmt=True)}, now=now) == 0.0
    assert retry_after_from({"retry-after": "3600"}, now=now) == MAX_RETRY_AFTER
    assert retry_after_from({"retry-after": "soon"}, now=now) is None
    assert retry_after_from({}, now=now) is None
    # OpenAI: durations; the exhausted limit wins.
    assert retry_after_from({"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0",
                             "x-ratelimit-reset-requests": "20ms", "x-ratelimit-remaining-requests": "99"},
                            now=now) == 360.0
    assert retry_after_from({"x-ratelimit-reset-requests": "1m30.5s", "x-ratelimit-reset-tokens": "2s"},
                            now=now) == 2.0
    # Reset headers come with every response: on a 529 they are not a request to wait.
    resets = {"anthropic-ratelimit-tokens-reset": "2030-01-01T00:00:00Z"}
    assert classify_status(529, "Overloaded", resets).retry_after is None
    assert classify_status(429, "slow down", resets).retry_after == MAX_RETRY_AFTER


def test_retry_hint_makes_a_quota_429_a_rate_limit() -> None:
    error = classify_status(429, "You exceeded your current quota", {}, retry_hint=37.0)
    assert (error.kind, error.retryable, error.retry_after) == ("rate_limited", True, 37.0)
    # Headers win over the body's hint.
    assert classify_status(429, "slow down", {"retry-after": "3"}, retry_hint=37.0).retry_after == 3.0
    # Non-retryable errors carry no wait.
    assert classify_status(400, "bad", {"retry-after": "3"}).retry_after is None


def test_build_provider() -> None:
    assert isinstance(build_provider("anthropic", api_key="k", base_url=""), AnthropicProvider)
    local = build_provider("openai", api_key=None, base_url="http://127.0.0.1:8001/v1")
    assert isinstance(local, OpenAICompatProvider) and local.base_url == "http://127.0.0.1:8001/v1"
    assert isinstance(build_provider("gemini", api_key="k", base_url=None), GeminiProvider)
    with pytest.raises(ValueError, match="unknown provider 'mistral'"):
        build_provider("mistral", api_key="k", base_url=None)
    for name, base in (("anthropic", None), ("gemini", None), ("openai", None), ("openai", "")):
        with pytest.raises(UpstreamError) as info:
            build_provider(name, api_key="", base_url=base)
        assert (info.value.kind, info.value.retryable) == ("auth", False)
        assert "no API key configured" in info.value.message


def test_cost_usd() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=2_000, cache_read_tokens=100_000, cache_write_tokens=10_000)
    price = Price(input_per_mtok=3.0, output_per_mtok=15.0, cache_read_per_mtok=0.3, cache_write_per_mtok=3.75)
    assert cost_usd(usage, price) == pytest.approx((3_000 + 30_000 + 30_000 + 37_500) / 1e6)
    assert cost_usd(usage, None) == 0.0
    assert cost_usd(Usage(), price) == 0.0
    assert usage + usage == Usage(2_000, 4_000, 200_000, 20_000)


# --- small servers in the OpenAI and Gemini wire formats ----------------------------------


class JsonServer:
    """Answers POSTs from a queue of (status, body, headers); records what it was sent."""

    def __init__(self) -> None:
        self.answers: deque[tuple[int, Any, dict[str, str]]] = deque()
        self.received: list[tuple[str, dict[str, str], Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms per answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)))
                status, body, headers = outer.answers.popleft()
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                if "content-type" not in headers:  # an answer may set its own (a stream's)
                    self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                                        daemon=True)
        self._thread.start()

    def answer(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self.answers.append((status, body, dict(headers or {})))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def http_server() -> Iterator[JsonServer]:
    server = JsonServer()
    yield server
    server.close()


OPENAI_OK = {
    "id": "chatcmpl-9xYz", "object": "chat.completion", "created": 1_715_000_000,
    "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_abc",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Plan ready.", "refusal": None},
                 "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 2_006, "completion_tokens": 300, "total_tokens": 2_306,
              "prompt_tokens_details": {"cached_tokens": 1_920, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}},
}
OPENAI_KEY = "sk-proj-OPENAI-TEST-KEY-5678"


def test_openai_success(http_server: JsonServer) -> None:
    http_server.answer(200, OPENAI_OK)
    provider = OpenAICompatProvider(base_url=http_server.url + "/v1", api_key=OPENAI_KEY, timeout=5.0)
    done = provider.complete(CONV, model="gpt-4o", max_tokens=300, temperature=0.2)
    assert done == Completion(text="Plan ready.", usage=Usage(input_tokens=86, output_tokens=300,
                                                              cache_read_tokens=1_920),
                              stop_reason="end_turn", model="gpt-4o-2024-08-06", response_id="chatcmpl-9xYz")
    path, headers, body = http_server.received[0]
    assert path == "/v1/chat/completions"
    assert headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert body["model"] == "gpt-4o" and body["max_tokens"] == 300 and body["temperature"] == 0.2
    assert [m["role"] for m in body["messages"]] == ["system", "system", "user"]


def test_openai_without_key_sends_no_authorization(http_server: JsonServer) -> None:
    http_server.answer(200, {**OPENAI_OK, "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
    provider = build_provider("openai", api_key=None, base_url=http_server.url + "/v1")
    done = provider.complete(CONV, model="qwen2.5-coder", max_tokens=16, temperature=None)
    assert done.usage == Usage(input_tokens=10, output_tokens=2)
    assert "authorization" not in http_server.received[0][1]
    assert "temperature" not in http_server.received[0][2]


def test_openai_rate_limit_is_retryable_with_reset_hint(http_server: JsonServer) -> None:
    http_server.answer(429, {"error": {
        "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, "
                   "Used 29000, Requested 2306. Please try again in 2.6s.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}},
        {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2.6s",
         "x-ratelimit-remaining-requests": "499", "x-ratelimit-reset-requests": "120ms"})
    provider = OpenAICompatProvider(base_url=http_server.url + "/v1", api_key=OPENAI_KEY, timeout=5.0)
    error = fail(provider)
    assert (error.kind, error.retryable, error.status, error.retry_after) == ("rate_limited", True, 429, 2.6)
    assert "Rate limit reached for gpt-4o" in error.message


def test_openai_insufficient_quota_is_final(http_server: JsonServer) -> None:
    http_server.answer(429, {"error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}})
    provider = OpenAICompatProvider(base_url=http_server.url + "/v1", api_key=OPENAI_KEY, timeout=5.0)
    error = fail(provider)
    assert (error.kind, error.retryable) == ("spend_limit", False)


def test_openai_bad_key_is_auth_and_scrubbed(http_server: JsonServer) -> None:
    http_server.answer(401, {"error": {"message": f"Incorrect API key provided: {OPENAI_KEY}.",
                                       "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})
    provider = OpenAICompatProvider(base_url=http_server.url + "/v1", api_key=OPENAI_KEY, timeout=5.0)
    error = fail(provider)
    assert (error.kind, error.retryable, error.status) == ("auth", False, 401)
    assert "Incorrect API key provided: ***" in error.message
    assert_no_key(error, OPENAI_KEY)


def test_openai_vllm_error_shape_and_context_length(http_server: JsonServer) -> None:
    http_server.answer(400, {"object": "error", "message": "This model's maximum context length is 32768 tokens.",
                             "type": "BadRequestError", "param": None, "code": 400})
    error = fail(OpenAICompatProvider(base_url=http_server.url + "/v1", timeout=5.0))
    assert (error.kind, error.retryable) == ("too_large", False)
    assert "maximum context length is 32768" in error.message


def test_openai_garbled_success_is_retryable(http_server: JsonServer) -> None:
    http_server.answer(200, "<html>gateway</html>")
    error = fail(OpenAICompatProvider(base_url=http_server.url + "/v1", timeout=5.0))
    assert (error.kind, error.retryable) == ("bad_response", True)


GEMINI_KEY = "AIzaSy-GEMINI-TEST-KEY-0000"
GEMINI_OK = {
    "candidates": [{"content": {"parts": [{"text": "thinking...", "thought": True}, {"text": "Review "},
                                          {"text": "done."}], "role": "model"},
                    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 3_000, "candidatesTokenCount": 40, "totalTokenCount": 3_052,
                      "cachedContentTokenCount": 2_048, "thoughtsTokenCount": 12},
    "modelVersion": "gemini-2.5-flash", "responseId": "mD8yZ5OkBqyG",
}


def test_gemini_success(http_server: JsonServer) -> None:
    http_server.answer(200, GEMINI_OK)
    provider = GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0)
    done = provider.complete(CONV, model="models/gemini-2.5-flash", max_tokens=512, temperature=0.2)
    assert done == Completion(text="Review done.", usage=Usage(input_tokens=952, output_tokens=52,
                                                               cache_read_tokens=2_048),
                              stop_reason="end_turn", model="gemini-2.5-flash", response_id="mD8yZ5OkBqyG")
    path, headers, body = http_server.received[0]
    assert path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert headers["x-goog-api-key"] == GEMINI_KEY and GEMINI_KEY not in path
    assert body["generationConfig"] == {"maxOutputTokens": 512, "temperature": 0.2}
    assert body["contents"][0]["role"] == "user" and "system_instruction" in body


def test_gemini_overloaded_is_retryable(http_server: JsonServer) -> None:
    http_server.answer(503, {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                                       "status": "UNAVAILABLE"}})
    error = fail(GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0))
    assert (error.kind, error.retryable, error.status) == ("overloaded", True, 503)


def test_gemini_per_minute_quota_with_retry_info_is_retryable(http_server: JsonServer) -> None:
    http_server.answer(429, {"error": {
        "code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}})
    error = fail(GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0))
    assert (error.kind, error.retryable, error.retry_after) == ("rate_limited", True, 37.0)


def test_gemini_invalid_key_is_final_auth(http_server: JsonServer) -> None:
    http_server.answer(400, {"error": {
        "code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                     "domain": "googleapis.com"}]}})
    error = fail(GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0))
    assert (error.kind, error.retryable, error.status) == ("auth", False, 400)
    assert "API key not valid" in error.message
    assert_no_key(error, GEMINI_KEY)


def test_gemini_quota_without_retry_info_is_final(http_server: JsonServer) -> None:
    http_server.answer(429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
                                       "message": "Quota exceeded for quota metric 'Generate requests per day'"}})
    error = fail(GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0))
    assert (error.kind, error.retryable) == ("spend_limit", False)


def test_gemini_blocked_prompt_is_final(http_server: JsonServer) -> None:
    http_server.answer(200, {"promptFeedback": {"blockReason": "SAFETY"},
                             "usageMetadata": {"promptTokenCount": 10}})
    error = fail(GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0))
    assert (error.kind, error.retryable) == ("blocked", False)


def test_httpx_providers_timeout_and_connection_errors(http_server: JsonServer) -> None:
    refused = f"http://127.0.0.1:{free_port()}"
    for provider in (OpenAICompatProvider(base_url=refused, timeout=2.0),
                     GeminiProvider(base_url=refused, api_key=GEMINI_KEY, timeout=2.0)):
        error = fail(provider)
        assert (error.kind, error.retryable) == ("connection", True)
    with ScriptedModel(latency=3.0) as slow:  # any server that answers late will do
        error = fail(OpenAICompatProvider(base_url=slow.url, timeout=0.3))
    assert (error.kind, error.retryable) == ("timeout", True)
    bad = fail(OpenAICompatProvider(base_url="ftp://127.0.0.1/v1", timeout=1.0))
    assert (bad.kind, bad.retryable) == ("invalid_request", False)


def test_anthropic_tool_use_blocks_are_parsed_into_tool_calls(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(content=[
        {"type": "text", "text": "Let me run the tests."},
        {"type": "tool_use", "id": "toolu_01A", "name": "run_tests", "input": {"path": "tests/test_retry.py"}},
    ])
    done = claude.complete(CONV, model="claude-sonnet-4-6", max_tokens=256, temperature=None)
    assert done.stop_reason == "tool_use"
    assert done.text == "Let me run the tests."
    assert done.tool_calls == (ToolUse("toolu_01A", "run_tests", {"path": "tests/test_retry.py"}),)


# --- native tool use, round trip: tools out, calls back, results out --------------------------

READ = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}},
                                              "required": ["path"], "additionalProperties": False})


def _with_result(call: ToolUse, text: str, *, is_error: bool = False) -> Conversation:
    return Conversation(system=CONV.system, tools=(READ,), turns=(
        *CONV.turns, Turn("assistant", "", tool_calls=(call,)),
        Turn("user", "", tool_results=(ToolOutput(call.id, text, is_error),)),
    ))


def test_anthropic_tool_round_trip(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(content=[{"type": "tool_use", "id": "toolu_9", "name": "read_file",
                           "input": {"path": "app/webhooks/retry.py"}}])
    first = claude.complete(Conversation(CONV.system, CONV.turns, (READ,)), model=MODEL, max_tokens=256,
                            temperature=None)
    assert model.last_request["tools"] == [{"name": "read_file", "description": "Read a file.",
                                            "input_schema": dict(READ.input_schema)}]
    (call,) = first.tool_calls
    assert (first.text, first.stop_reason) == ("", "tool_use")
    second = claude.complete(_with_result(call, "1 | import random", is_error=True), model=MODEL, max_tokens=256,
                             temperature=None)
    assert second.text == REPLIES["coding"][0] and second.tool_calls == ()
    messages = model.last_request["messages"]
    assert messages[1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {"path": "app/webhooks/retry.py"}}]}
    assert messages[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "1 | import random", "is_error": True}]}


def test_anthropic_unanswered_tool_use_is_the_apis_400(claude: AnthropicProvider) -> None:
    call = ToolUse("toolu_1", "read_file", {"path": "x"})
    conv = Conversation(CONV.system, (*CONV.turns, Turn("assistant", "", tool_calls=(call,)), Turn("user", "go")),
                        (READ,))
    error = fail(claude, conv)
    assert (error.kind, error.retryable) == ("invalid_request", False)
    assert "without `tool_result` blocks immediately after: toolu_1" in error.message


def test_anthropic_stream_keeps_text_and_tool_calls_apart(claude: AnthropicProvider, model: ScriptedModel) -> None:
    model.inject(content=[{"type": "text", "text": "Reading."},
                          {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "a.py"}}])
    events = list(claude.stream(Conversation(CONV.system, CONV.turns, (READ,)), model=MODEL, max_tokens=256,
                                temperature=None))
    deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
    done = events[-1]
    assert isinstance(done, Completion) and deltas == done.text == "Reading."
    assert done.tool_calls == (ToolUse("toolu_2", "read_file", {"path": "a.py"}),)


def test_openai_tool_round_trip(http_server: JsonServer) -> None:
    asked = {**OPENAI_OK, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "app/webhooks/retry.py"}'}},
            {"id": "call_bad", "type": "function", "function": {"name": "read_file", "arguments": "{not json"}},
        ]}}]}
    http_server.answer(200, asked)
    http_server.answer(200, OPENAI_OK)
    provider = OpenAICompatProvider(base_url=http_server.url + "/v1", api_key=OPENAI_KEY, timeout=5.0)
    first = provider.complete(Conversation(CONV.system, CONV.turns, (READ,)), model="gpt-4o", max_tokens=300,
                              temperature=None)
    assert (first.text, first.stop_reason) == ("", "tool_use")
    assert first.tool_calls == (ToolUse("call_abc", "read_file", {"path": "app/webhooks/retry.py"}),
                                ToolUse("call_bad", "read_file", {"_invalid_arguments": "{not json"}))
    _, _, body = http_server.received[0]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file.", "parameters": dict(READ.input_schema)}}]
    second = provider.complete(_with_result(first.tool_calls[0], "1 | import random"), model="gpt-4o",
                               max_tokens=300, temperature=None)
    assert second.text == "Plan ready." and second.tool_calls == ()
    _, _, body = http_server.received[1]
    assert body["messages"][-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_abc", "type": "function", "function": {
            "name": "read_file", "arguments": '{"path": "app/webhooks/retry.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "1 | import random"},
    ]


def test_gemini_tool_round_trip(http_server: JsonServer) -> None:
    asked = {**GEMINI_OK, "candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": [
        {"text": "Reading the policy."},
        {"functionCall": {"name": "read_file", "args": {"path": "app/webhooks/retry.py"}}},
    ]}}]}
    http_server.answer(200, asked)
    http_server.answer(200, GEMINI_OK)
    provider = GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0)
    first = provider.complete(Conversation(CONV.system, CONV.turns, (READ,)), model="gemini-2.5-flash",
                              max_tokens=512, temperature=None)
    assert (first.text, first.stop_reason) == ("Reading the policy.", "tool_use")
    [call] = first.tool_calls
    assert (call.name, call.input) == ("read_file", {"path": "app/webhooks/retry.py"})
    assert re.fullmatch(r"call_1_read_file_[0-9a-f]{8}", call.id)  # Gemini gave no id: made, unique per turn
    _, _, body = http_server.received[0]
    assert body["tools"] == [{"functionDeclarations": [{"name": "read_file", "description": "Read a file.",
                              "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                             "required": ["path"]}}]}]
    provider.complete(_with_result(first.tool_calls[0], "1 | import random"), model="gemini-2.5-flash",
                      max_tokens=512, temperature=None)
    _, _, body = http_server.received[1]
    assert body["contents"][-2:] == [
        {"role": "model", "parts": [{"functionCall": {"id": call.id, "name": "read_file",
                                                      "args": {"path": "app/webhooks/retry.py"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": call.id, "name": "read_file",
                                                         "response": {"output": "1 | import random"}}}]},
    ]


# --- answers that are not what they claim: a 200 that is an error, garbled or cut short -----


ANTHROPIC_OK = {"id": "msg_01", "type": "message", "role": "assistant", "model": MODEL, "stop_reason": "end_turn",
                "stop_sequence": None, "content": [{"type": "text", "text": "Hello world"}],
                "usage": {"input_tokens": 10, "output_tokens": 7, "cache_read_input_tokens": 90}}


def _claude_on(server: JsonServer) -> AnthropicProvider:
    return AnthropicProvider(api_key=API_KEY, base_url=server.url, timeout=5.0)


@pytest.mark.parametrize(("body", "kind", "retryable", "words"), [
    ("{not json", "bad_response", True, "JSONDecodeError"),
    ([1, 2], "bad_response", True, "not a Message"),
    ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overloaded", True,
     "overloaded_error: Overloaded (an error inside an HTTP 200 answer)"),
    ({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}},
     "invalid_request", False, "max_tokens: too large"),
])
def test_anthropic_a_200_that_is_no_message_is_a_classified_error(http_server: JsonServer, body: Any, kind: str,
                                                                   retryable: bool, words: str) -> None:
    """A proxy's garbled 200 or an error body sent with 200 raised JSONDecodeError, TypeError or
    AttributeError from the SDK's unvalidated Message: unclassified, so the call's ledger row
    stayed "calling" and the gateway answered 500."""
    http_server.answer(200, body)
    error = fail(_claude_on(http_server))
    assert (error.kind, error.retryable) == (kind, retryable)
    assert words in error.message
    assert_no_key(error)


def test_anthropic_answer_without_usage_counts_zero_tokens(http_server: JsonServer) -> None:
    http_server.answer(200, {k: v for k, v in ANTHROPIC_OK.items() if k != "usage"})
    done = _claude_on(http_server).complete(CONV, model=MODEL, max_tokens=64, temperature=None)
    assert (done.text, done.usage) == ("Hello world", Usage())


def _sse(*events: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events)


_START = ("message_start", {"message": {**ANTHROPIC_OK, "content": [], "stop_reason": None,
                                        "usage": {"input_tokens": 10, "output_tokens": 1}}})
_BLOCK = ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
_HELLO = ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hello "}})
_END = [("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 7}}),
        ("message_stop", {})]
SSE = {"content-type": "text/event-stream"}


def _stream(provider: AnthropicProvider) -> tuple[list[Any], UpstreamError | None]:
    seen: list[Any] = []
    try:
        for event in provider.stream(CONV, model=MODEL, max_tokens=64, temperature=None):
            seen.append(event)
    except UpstreamError as err:
        return seen, err
    return seen, None


def test_anthropic_stream_cut_before_message_stop_is_an_error_not_a_short_answer(http_server: JsonServer) -> None:
    """The server closed the stream cleanly mid-turn: the SDK's snapshot of "Hello " came back
    as a whole Completion (stop_reason None), which the gateway forwarded as a finished answer."""
    http_server.answer(200, _sse(_START, _BLOCK, _HELLO), SSE)
    http_server.answer(200, "", SSE)  # no event at all: the SDK's own assertion, unclassified before
    http_server.answer(200, _sse(_START, _BLOCK, _HELLO, *_END), SSE)
    provider = _claude_on(http_server)
    seen, error = _stream(provider)
    assert error is not None and (error.kind, error.retryable) == ("bad_response", True)
    assert "ended before its message_stop event (6 characters" in error.message
    assert not any(isinstance(e, Completion) for e in seen)
    seen, error = _stream(provider)
    assert error is not None and error.kind == "bad_response" and seen == []
    seen, error = _stream(provider)
    assert error is None and seen[-1].text == "Hello " and seen[-1].usage.output_tokens == 7


@pytest.mark.parametrize(("error_type", "kind", "retryable"), [
    ("overloaded_error", "overloaded", True), ("rate_limit_error", "rate_limited", True),
    ("api_error", "server", True), ("invalid_request_error", "invalid_request", False),
])
def test_anthropic_stream_error_event_is_classified_by_its_type(http_server: JsonServer, error_type: str, kind: str,
                                                                retryable: bool) -> None:
    """An `event: error` arrives on the stream's 200: it was classified by that 200, as an
    invalid request never retried (and the gateway told its caller the request was invalid)."""
    http_server.answer(200, _sse(_START, _BLOCK, _HELLO,
                                 ("error", {"error": {"type": error_type, "message": "Overloaded"}})), SSE)
    _, error = _stream(_claude_on(http_server))
    assert error is not None and (error.kind, error.retryable) == (kind, retryable)
    assert "(an error event inside the stream)" in error.message


@pytest.mark.parametrize(("error", "kind", "retryable", "status"), [
    ({"message": "The server had an error processing your request.", "type": "server_error", "code": None},
     "server", True, 500),
    ({"message": "This model's maximum context length is 8192 tokens.", "type": "invalid_request_error",
      "code": "context_length_exceeded"}, "too_large", False, 400),
    ({"message": "Provider returned error", "code": 429, "metadata": {"provider_name": "x"}}, "rate_limited", True,
     429),  # OpenRouter's shape
    ({"message": "something odd"}, "bad_response", True, 200),
])
def test_openai_a_200_carrying_an_error_is_classified_by_it(http_server: JsonServer, error: dict[str, Any],
                                                             kind: str, retryable: bool, status: int) -> None:
    """LiteLLM and OpenRouter answer 200 with the upstream's error object: it was "no choices in
    the chat completion", retried whatever it said and without its words."""
    http_server.answer(200, {"error": error})
    found = fail(OpenAICompatProvider(base_url=http_server.url + "/v1", api_key=OPENAI_KEY, timeout=5.0))
    assert (found.kind, found.retryable, found.status) == (kind, retryable, status)
    assert error["message"] in found.message


def test_gemini_a_200_carrying_an_error_is_classified_by_its_status(http_server: JsonServer) -> None:
    http_server.answer(200, {"error": {"code": 400, "message": "Request contains an invalid argument.",
                                       "status": "INVALID_ARGUMENT"}})
    http_server.answer(200, {"error": {"message": "The model is overloaded.", "status": "UNAVAILABLE"}})
    provider = GeminiProvider(base_url=http_server.url + "/v1beta", api_key=GEMINI_KEY, timeout=5.0)
    first, second = fail(provider), fail(provider)
    assert (first.kind, first.retryable, first.status) == ("invalid_request", False, 400)
    assert (second.kind, second.retryable, second.status) == ("overloaded", True, 503)
    assert "Request contains an invalid argument. (an error inside an HTTP 200 answer)" in first.message


def test_tool_call_ids_a_server_does_not_give_differ_from_turn_to_turn(http_server: JsonServer) -> None:
    """Gemini (and OpenAI-compatible servers that omit ids) got ids from the call's position only:
    every turn's first read_file was call_0_read_file, so an earlier turn's result "answered" a
    later call left without one (a cancelled stage), and every later request was refused."""
    gemini_call = {**GEMINI_OK, "candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": [
        {"functionCall": {"name": "read_file", "args": {"path": "a.py"}}}]}}]}
    openai_call = {**OPENAI_OK, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]}}]}
    conv = Conversation(CONV.system, CONV.turns, (READ,))
    for provider, answer in ((GeminiProvider(base_url=http_server.url, api_key=GEMINI_KEY, timeout=5.0), gemini_call),
                             (OpenAICompatProvider(base_url=http_server.url, timeout=5.0), openai_call)):
        http_server.answer(200, answer)
        http_server.answer(200, answer)
        ids = {provider.complete(conv, model="m", max_tokens=64, temperature=None).tool_calls[0].id for _ in "ab"}
        assert len(ids) == 2
