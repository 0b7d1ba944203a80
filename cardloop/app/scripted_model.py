"""ScriptedModel: a TEST DOUBLE that speaks the Anthropic Messages API on 127.0.0.1.

It is a real HTTP server (standard library only, starts in milliseconds) so the real `anthropic` client,
its headers, its error classes and our error classification are all exercised. It is not a
language model: it answers from a script. Three uses:

1. Offline demo: ``ScriptedModel(load_transcript("examples/transcript.json"))``. A transcript
   maps a stage to its replies. The stage comes from the agent block of the system prompt
   ("# Stage: planning" | coding | code review | testing | error fixing); the n-th request of a
   stage gets the n-th reply and the last reply repeats. A stage with no replies falls back to
   the "default" entry, else gets a reply ending in <promise>BLOCKED</promise> that says so.
   A request whose system prompt begins with "# Summarize a card's conversation" gets a
   deterministic extractive summary of the request's messages under the six headings the
   summarize template asks for.
2. Fault injection for tests: ``server.inject(status=529)``, ``inject(status=429, retry_after=7)``,
   ``inject(delay=2.0)``... queue faults that the next requests consume, one each, before any
   normal reply. Error bodies, error types and the request-id header are the API's own.
3. Benchmarks: ``ScriptedModel(latency=0.05)`` sleeps that long before every answer.

It validates requests the way the API does where our code could get it wrong (model,
max_tokens, messages, roles, first role user, system shape, at most 4 cache_control blocks,
temperature range, unknown fields, the anthropic-version and x-api-key headers) and answers
400 invalid_request_error otherwise. Usage numbers are plausible: about one token per four
characters, and a prompt-cache model (a prefix up to a cache_control breakpoint, at least
`min_cache_tokens` long, is written once and read by later requests with the same prefix
within `cache_ttl`). ``"stream": true`` is answered with the API's server-sent events
(message_start, content_block_start, ping, content_block_delta..., content_block_stop,
message_delta, message_stop), the reply text cut into several text deltas; `latency` (and an
injected delay) passes before the first event, `chunk_delay` (constructor, attribute or
``inject(chunk_delay=...)``) between deltas, so tests can watch a stream arrive piece by piece.
An injected error status is a plain JSON error response, as the API answers before a stream.

Run it alone: ``python -m cardloop.scripted_model examples/transcript.json --port 8765``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import secrets
import socket
import string
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cardloop.contracts.errors import InputError

STAGES: tuple[str, ...] = ("planning", "coding", "review", "testing", "error_fixing")
# A transcript may also hold "default": the replies for a stage it does not list.
TRANSCRIPT_KEYS: tuple[str, ...] = (*STAGES, "default")
SUMMARY_HEADING = "# Summarize a card's conversation"
MAX_CACHE_CONTROL = 4
MESSAGES_PATH = "/v1/messages"

_STAGE_LINE = re.compile(r"^# Stage:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_STAGE_ALIASES = {"code_review": "review", "error_fix": "error_fixing"}
# Every top-level field of the Messages API; anything else is a bug on our side (the real API
# answers "Extra inputs are not permitted").
_KNOWN_FIELDS = frozenset({
    "model", "messages", "max_tokens", "system", "cache_control", "container", "context_management",
    "diagnostics", "inference_geo", "mcp_servers", "metadata", "output_config", "service_tier", "speed",
    "stop_sequences", "stream", "thinking", "tool_choice", "tools", "user_profile_id", "workspace_id",
})
# Sampling parameters exist only before API version 2026-10-21 (the one SDK 2.x sends).
_SAMPLING_FIELDS = frozenset({"temperature", "top_p", "top_k"})
SAMPLING_REMOVED_IN = "2026-10-21"
_DEFAULT_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API. "
                           "Please go to Plans & Billing to upgrade or purchase credits."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "This request would exceed the rate limit for your organization of "
                              "50 requests per minute. Please reduce the prompt length or the maximum "
                              "tokens requested, or try again later."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}
_ALPHABET = string.ascii_letters + string.digits


class TranscriptError(InputError, ValueError):
    """A transcript file or mapping is unusable; the message names the file and the entry."""


def normalize_stage(name: str) -> str:
    """"Code review", "code-review", "review" -> "review"; "Error fixing" -> "error_fixing"."""
    key = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return _STAGE_ALIASES.get(key, key)


def _check_transcript(data: Any, source: str) -> dict[str, list[str]]:
    if not isinstance(data, Mapping):
        raise TranscriptError(
            f"{source}: a transcript must be a JSON object mapping a stage to a list of replies, "
            f"got {type(data).__name__}"
        )
    out: dict[str, list[str]] = {}
    for raw_key, replies in data.items():
        if not isinstance(raw_key, str):
            raise TranscriptError(f"{source}: stage names must be strings, got {raw_key!r}")
        if raw_key.startswith("_"):
            continue  # "_about" and friends: comments, JSON has no other kind
        stage = normalize_stage(raw_key)
        if stage not in TRANSCRIPT_KEYS:
            raise TranscriptError(
                f"{source}: unknown stage {raw_key!r}; expected one of: {', '.join(TRANSCRIPT_KEYS)}"
            )
        if stage in out:
            raise TranscriptError(f"{source}: stage {stage!r} is given twice (as {raw_key!r} too)")
        if isinstance(replies, str) or not isinstance(replies, Sequence):
            raise TranscriptError(
                f"{source}: stage {raw_key!r}: expected a list of reply strings, got {type(replies).__name__}"
            )
        if not replies:
            raise TranscriptError(f"{source}: stage {raw_key!r} has no replies")
        for i, reply in enumerate(replies, 1):
            if not isinstance(reply, str):
                raise TranscriptError(
                    f"{source}: stage {raw_key!r} reply {i}: expected a string, got {type(reply).__name__}"
                )
            if not reply.strip():
                raise TranscriptError(f"{source}: stage {raw_key!r} reply {i} is empty")
        out[stage] = list(replies)
    return out


def load_transcript(path: str | Path) -> dict[str, list[str]]:
    """Read a transcript file: a JSON object {stage: [reply, ...]} (keys starting with "_" are
    comments). Raises TranscriptError naming the file and what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TranscriptError(f"transcript {p}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"transcript {p}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"transcript {p}: not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") \
            from None
    return _check_transcript(data, f"transcript {p}")


@dataclass(frozen=True)
class Fault:
    """One injected failure: sleep `delay`, then answer `status` (None: answer normally)."""

    status: int | None = None
    message: str | None = None
    error_type: str | None = None
    retry_after: float | str | None = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    # Answer with these content blocks (text and tool_use) instead of the scripted text.
    content: tuple[Mapping[str, Any], ...] | None = None
    # Seconds between streamed deltas for this request (None: the model's chunk_delay).
    chunk_delay: float | None = None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: Any  # parsed JSON, or None when the body was empty or not JSON


@dataclass
class _Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False  # send `body` (a message) as the API's server-sent events
    chunk_delay: float = 0.0


# Characters per streamed text delta, at most (cut after whitespace): a reply of a sentence or two
# still arrives in several deltas, as the API's does.
STREAM_CHUNK_CHARS = 24


def text_deltas(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """`text` cut into deltas of at most `size` characters, after whitespace where possible."""
    deltas: list[str] = []
    current = ""
    for word in re.findall(r"\S+\s*|\s+", text):
        if current and len(current) + len(word) > size:
            deltas.append(current)
            current = ""
        while len(word) > size:
            deltas.append(word[:size])
            word = word[size:]
        current += word
    if current:
        deltas.append(current)
    return deltas


def stream_events(message: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A complete message as the API's stream events (name, data), in the API's order.

    content_block_delta events are the only ones a per-chunk delay applies to.
    """
    usage = dict(message["usage"])
    output_tokens = usage["output_tokens"]
    # message_start carries the input side; output_tokens is the API's small running count there.
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": min(output_tokens, 1)}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block.get("type") == "tool_use":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {**block, "input": {}}}
            partial = json.dumps(block.get("input", {}))
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta", "partial_json": partial}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            if index == 0:
                yield "ping", {"type": "ping"}
            for piece in text_deltas(block.get("text", "")):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    if not message["content"]:
        yield "ping", {"type": "ping"}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": output_tokens}}
    yield "message_stop", {"type": "message_stop"}


def _new_id(prefix: str) -> str:
    return prefix + "01" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


def _tokens(text: str) -> int:
    # About four characters per token for English and code: good enough for plausible usage.
    return math.ceil(len(text) / 4)


def _error(status: int, message: str | None = None, error_type: str | None = None) -> _Answer:
    default_type, default_message = _DEFAULT_ERRORS.get(
        status, ("api_error" if status >= 500 else "invalid_request_error", "Error")
    )
    request_id = _new_id("req_")
    body = {
        "type": "error",
        "error": {"type": error_type or default_type, "message": message or default_message},
        "request_id": request_id,
    }
    return _Answer(status, body, {"request-id": request_id,
                                  "x-should-retry": "true" if status in (408, 409, 429) or status >= 500 else "false"})


def _invalid(message: str) -> _Answer:
    return _error(400, message, "invalid_request_error")


def _block_text(block: Any) -> str:
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return block["text"]
    return json.dumps(block, sort_keys=True)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(b) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return ""


def _system_texts(system: Any) -> list[str]:
    if isinstance(system, str):
        return [system]
    if isinstance(system, list):
        return [b.get("text", "") for b in system if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    return []


def _check_cache_control(value: Any, where: str) -> str | None:
    if not isinstance(value, Mapping) or value.get("type") != "ephemeral":
        return f"{where}.cache_control.type: Input should be 'ephemeral'"
    if "ttl" in value and value["ttl"] not in ("5m", "1h"):
        return f"{where}.cache_control.ttl: Input should be '5m' or '1h'"
    return None


def _check_text_block(block: Any, where: str) -> str | None:
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        return f"{where}: Input should be a valid content block with a 'type'"
    if block["type"] == "text":
        if not isinstance(block.get("text"), str):
            return f"{where}.text: Field required"
        if not block["text"]:
            return f"{where}: text content blocks must be non-empty"
    if "cache_control" in block:
        return _check_cache_control(block["cache_control"], where)
    return None


def validate_request(body: Any, api_version: str = SAMPLING_REMOVED_IN) -> str | None:
    """The API's message for the first problem in a Messages request body, or None when valid.

    `api_version` is the anthropic-version header: from 2026-10-21 on, temperature, top_p and
    top_k are unknown fields, as in the real API.
    """
    if not isinstance(body, Mapping):
        return "request body: Input should be a valid JSON object"
    sampling = api_version < SAMPLING_REMOVED_IN  # ISO dates compare as strings
    for key in body:
        if key not in _KNOWN_FIELDS and not (sampling and key in _SAMPLING_FIELDS):
            return f"{key}: Extra inputs are not permitted"
    model = body.get("model")
    if model is None:
        return "model: Field required"
    if not isinstance(model, str) or not model.strip():
        return "model: Input should be a non-empty string"
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        return "max_tokens: Field required"
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return "max_tokens: Input should be a valid integer"
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return "stream: Input should be a valid boolean"
    temperature = body.get("temperature")
    if temperature is not None:
        if not isinstance(temperature, int | float) or isinstance(temperature, bool):
            return "temperature: Input should be a valid number"
        if not 0.0 <= temperature <= 1.0:
            return "temperature: Input should be greater than or equal to 0 and less than or equal to 1"
    if "cache_control" in body:
        problem = _check_cache_control(body["cache_control"], "body")
        if problem:
            return problem.removeprefix("body.")
    system = body.get("system")
    if system is not None:
        if isinstance(system, list):
            for j, block in enumerate(system):
                if not isinstance(block, Mapping) or block.get("type") != "text":
                    return f"system.{j}.type: Input should be 'text'"
                problem = _check_text_block(block, f"system.{j}")
                if problem:
                    return problem
        elif not isinstance(system, str):
            return "system: Input should be a valid string or a list of text blocks"
    messages = body.get("messages")
    if messages is None:
        return "messages: Field required"
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages.{i}: Input should be a valid dictionary"
        if message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        last_assistant = i == len(messages) - 1 and message["role"] == "assistant"
        if isinstance(content, str):
            if not content and not last_assistant:
                return (f"messages.{i}: all messages must have non-empty content except for the "
                        "optional final assistant message")
        elif isinstance(content, list):
            if not content and not last_assistant:
                return (f"messages.{i}: all messages must have non-empty content except for the "
                        "optional final assistant message")
            for j, block in enumerate(content):
                problem = _check_text_block(block, f"messages.{i}.content.{j}")
                if problem:
                    return problem
        else:
            return f"messages.{i}.content: Input should be a valid string or a list of content blocks"
    if messages[0]["role"] != "user":
        return 'messages: first message must use the "user" role'
    last = messages[-1]
    if last["role"] == "assistant":
        prefill = _content_text(last.get("content"))
        if prefill != prefill.rstrip():
            return "messages: final assistant content cannot end with trailing whitespace"
    found = _count_cache_control(body)
    if found > MAX_CACHE_CONTROL:
        return f"A maximum of {MAX_CACHE_CONTROL} blocks with cache_control may be provided. Found {found}."
    return None


def _count_cache_control(body: Mapping[str, Any]) -> int:
    count = 1 if "cache_control" in body else 0  # top-level (automatic) caching uses a slot too
    blocks: list[Any] = []
    if isinstance(body.get("system"), list):
        blocks.extend(body["system"])
    for message in body.get("messages") or []:
        if isinstance(message, Mapping) and isinstance(message.get("content"), list):
            blocks.extend(message["content"])
    if isinstance(body.get("tools"), list):
        blocks.extend(body["tools"])
    for block in blocks:
        if isinstance(block, Mapping) and "cache_control" in block:
            count += 1
    return count


# --- the summarizer -----------------------------------------------------------------------

_TAG_LINE = re.compile(r"^</?[\w:.-]+(\s[^>]*)?>$")
_DECISION = re.compile(r"\b(decided|decision|agreed|approved|lgtm|we will|let's|chose)\b", re.IGNORECASE)
_ERROR = re.compile(r"(error|exception|traceback|failed|failure|crashloop)", re.IGNORECASE)
_REMAINING = re.compile(r"(- \[ \]|\btodo\b|\bremain|\bleft:|\bnext\b|\bstill open\b|\bopen question)",
                        re.IGNORECASE)
_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|md|toml|ya?ml|json|sql|ts|js|go|rs|txt|cfg|ini|sh)\b")


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not _TAG_LINE.match(line):
            out.append(line[:200])
    return out


def _pick(lines: list[str], pattern: re.Pattern[str], limit: int) -> list[str]:
    seen: list[str] = []
    for line in lines:
        if pattern.search(line) and line not in seen:
            seen.append(line)
            if len(seen) == limit:
                break
    return seen


def _section(title: str, items: list[str]) -> str:
    body = "\n".join(f"- {item}" for item in items) if items else "none"
    return f"## {title}\n{body}"


def summarize(messages: Sequence[Mapping[str, Any]]) -> str:
    """A deterministic extractive summary of a summarization request's messages, under the
    headings prompts/templates/summarize.md asks for. Simple, but it reads the real input."""
    turns = [(str(m.get("role")), _lines(_content_text(m.get("content")))) for m in messages]
    everything = [line for _, lines in turns for line in lines]
    requested: list[str] = []
    for role, lines in turns:
        if role == "user" and lines and lines[0] not in requested:
            requested.append(lines[0])
    paths: list[str] = []
    for line in everything:
        for path in _PATH.findall(line):
            if path not in paths:
                paths.append(path)
    assistant = [lines for role, lines in turns if role == "assistant" and lines]
    state = [assistant[-1][0]] if assistant else []
    return "\n\n".join([
        _section("Requested", requested[:6]),
        _section("Decisions", _pick(everything, _DECISION, 5)),
        _section("Errors", _pick(everything, _ERROR, 5)),
        _section("Code", [", ".join(paths[:12])] if paths else []),
        _section("State", state),
        _section("Remaining", _pick(everything, _REMAINING, 5)),
    ])


# --- the server ---------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds ~40 ms to each answer.
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.model._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.model._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and demos assert on recorded requests, not on access logs

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self) -> None:
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.server.model._handle(self.command, self.path, headers, raw)
        if answer is None:
            self.close_connection = True  # stopped while sleeping: drop the connection, like a crash
            return
        if answer.stream:
            self._send_stream(answer)
            return
        data = json.dumps(answer.body).encode()
        self.send_response(answer.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, answer: _Answer) -> None:
        # Chunked, as the API sends it: the length is unknown up front and the connection stays reusable.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        deltas = 0
        for name, data in stream_events(answer.body):
            if name == "content_block_delta":
                if deltas and not self.server.model._sleep(answer.chunk_delay):
                    self.close_connection = True  # stopped mid-stream: cut it off, no final chunk
                    return
                deltas += 1
            # Compact JSON, one `data:` line per event, exactly as the API sends them.
            frame = f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for a handler sleeping on an injected delay
    request_queue_size = 128  # benchmarks open many connections at once

    def __init__(self, address: tuple[str, int], model: ScriptedModel) -> None:
        self.model = model
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is what timeout tests do on purpose.
        if isinstance(sys.exc_info()[1], ConnectionError | OSError):
            return
        super().handle_error(request, client_address)


class ScriptedModel:
    """See the module docstring. Thread-safe; one instance per test or demo."""

    def __init__(
        self,
        transcript: Mapping[str, Sequence[str]] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        chunk_delay: float = 0.0,
        api_key: str | None = None,
        min_cache_tokens: int = 1024,
        cache_ttl: float = 300.0,
    ) -> None:
        self.transcript = _check_transcript(transcript or {}, "transcript")
        self.host = host
        self.port = port
        self.latency = latency
        # Seconds slept between the text deltas of a streamed answer (the first leaves after `latency`).
        self.chunk_delay = chunk_delay
        # None: any non-empty key is accepted; a value: only that key (others get 401).
        self.api_key = api_key
        self.min_cache_tokens = min_cache_tokens
        self.cache_ttl = cache_ttl
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._requests: list[RecordedRequest] = []
        self._stage_counts: dict[str, int] = {}
        self._cache: dict[str, float] = {}  # prefix digest -> expiry (monotonic)
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    @property
    def url(self) -> str:
        """The base URL to give the SDK (it appends /v1/messages)."""
        if self._server is None:
            raise RuntimeError("ScriptedModel is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> ScriptedModel:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=f"scripted-model:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes handlers sleeping on a delay
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            # Kept-alive connections would otherwise keep being served after stop().
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    # -- faults and assertions --

    def inject(
        self,
        status: int | None = None,
        *,
        message: str | None = None,
        error_type: str | None = None,
        retry_after: float | str | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
        times: int = 1,
        content: Sequence[Mapping[str, Any]] | None = None,
        chunk_delay: float | None = None,
    ) -> None:
        """Queue a fault for each of the next `times` requests to /v1/messages.

        status: an HTTP error status (>= 400) answered in the API's error shape, with the API's
        error type for it (529 overloaded_error, 429 rate_limit_error, ...) unless `error_type`
        says otherwise; None answers normally. retry_after: sent as the retry-after header
        (seconds, or a string such as an HTTP date). delay: seconds slept before answering.
        headers: extra response headers (e.g. anthropic-ratelimit-tokens-reset).
        content: answer (with status None) with these content blocks, e.g. a text block and a
        {"type": "tool_use", "id": "toolu_...", "name": ..., "input": {...}} block; stop_reason is
        "tool_use" when one is present.
        chunk_delay: seconds between the deltas of a streamed answer (None: the model's).
        """
        if status is not None and not 400 <= status <= 599:
            raise ValueError(f"inject(status={status}): an injected status must be an HTTP error (400-599)")
        if delay < 0 or times < 1 or (chunk_delay is not None and chunk_delay < 0):
            raise ValueError("inject: delay and chunk_delay must be >= 0 and times >= 1")
        fault = Fault(status, message, error_type, retry_after, delay, dict(headers or {}),
                      tuple(dict(b) for b in content) if content is not None else None, chunk_delay)
        with self._lock:
            self._faults.extend([fault] * times)

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def last_request(self) -> Any:
        """The JSON body of the last request received, or None."""
        with self._lock:
            return self._requests[-1].body if self._requests else None

    @property
    def stage_counts(self) -> dict[str, int]:
        """How many scripted replies each stage has served."""
        with self._lock:
            return dict(self._stage_counts)

    def reset(self) -> None:
        """Forget requests, faults, reply positions and the prompt cache."""
        with self._lock:
            self._faults.clear()
            self._requests.clear()
            self._stage_counts.clear()
            self._cache.clear()

    # -- request handling (runs on the server's handler threads) --

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopped meanwhile; False when the server is stopping."""
        if seconds > 0:
            self._stopping.wait(seconds)
        return not self._stopping.is_set()

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> _Answer | None:
        try:
            body: Any = json.loads(raw) if raw else None
            parsed = True
        except (ValueError, UnicodeDecodeError):
            body, parsed = None, False
        route = path.split("?", 1)[0]
        is_messages = method == "POST" and route == MESSAGES_PATH
        with self._lock:
            self._requests.append(RecordedRequest(method, path, headers, body))
            fault = self._faults.popleft() if is_messages and self._faults else None
        if not self._sleep((fault.delay if fault else 0.0) + self.latency):
            return None
        if fault is not None and fault.status is not None:
            answer = _error(fault.status, fault.message, fault.error_type)
            if fault.retry_after is not None:
                value = fault.retry_after
                answer.headers["retry-after"] = (
                    str(int(value)) if isinstance(value, float | int) and float(value).is_integer() else str(value)
                )
            answer.headers.update(fault.headers)
            return answer
        if route != MESSAGES_PATH:
            return _error(404, f"Not found: {method} {route}", "not_found_error")
        if method != "POST":
            return _error(405, f"Method not allowed: {method}", "invalid_request_error")
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not key:
            return _error(401, "x-api-key header is required", "authentication_error")
        if self.api_key is not None and key != self.api_key:
            return _error(401, "invalid x-api-key", "authentication_error")
        if not headers.get("anthropic-version"):
            return _invalid("anthropic-version: header is required")
        if not parsed:
            return _invalid("There was an error parsing the body of your request: invalid JSON")
        problem = validate_request(body, headers["anthropic-version"].strip())
        if problem:
            return _invalid(problem)
        answer = self._reply(body, fault.content if fault is not None else None)
        if body.get("stream"):
            answer.stream = True
            answer.chunk_delay = (fault.chunk_delay if fault is not None and fault.chunk_delay is not None
                                  else self.chunk_delay)
        return answer

    def _reply(self, body: Mapping[str, Any], content: Sequence[Mapping[str, Any]] | None = None) -> _Answer:
        system_texts = _system_texts(body.get("system"))
        messages = body["messages"]
        usage = self._usage(body)
        stop_reason = "end_turn"
        if content is not None:
            blocks = [dict(b) for b in content]
            if any(b.get("type") == "tool_use" for b in blocks):
                stop_reason = "tool_use"
            usage["output_tokens"] = max(sum(_tokens(json.dumps(b)) for b in blocks), 1)
        else:
            if any(t.lstrip().startswith(SUMMARY_HEADING) for t in system_texts):
                text = summarize(messages)
            else:
                text = self._scripted_reply(system_texts)
            max_tokens = body["max_tokens"]
            if _tokens(text) > max_tokens:
                text, stop_reason = text[: max_tokens * 4], "max_tokens"
            usage["output_tokens"] = max(_tokens(text), 1)
            blocks = [{"type": "text", "text": text}] if text else []
        request_id = _new_id("req_")
        return _Answer(200, {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }, {"request-id": request_id})

    def _scripted_reply(self, system_texts: list[str]) -> str:
        stage: str | None = None
        # A block that opens with the heading (the agent block) wins over a heading further down
        # some block, which could be quoted text (a tenant prompt, say).
        ordered = [t for t in system_texts if t.lstrip().startswith("# Stage:")] + system_texts
        for text in ordered:
            match = _STAGE_LINE.search(text)
            if match:
                stage = normalize_stage(match.group(1))
                break
        if stage is None:
            return ("ScriptedModel: no '# Stage:' heading in the system prompt, so there is no scripted "
                    "reply for this request.\n\n<promise>BLOCKED</promise>")
        key = stage if stage in self.transcript else "default"
        replies = self.transcript.get(key)
        if not replies:
            return (f"ScriptedModel: the transcript has no replies for stage {stage!r}.\n\n"
                    "<promise>BLOCKED</promise>")
        with self._lock:
            n = self._stage_counts.get(stage, 0)
            self._stage_counts[stage] = n + 1
        return replies[min(n, len(replies) - 1)]

    def _usage(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Plausible usage with a prompt cache: tokens ~ chars/4 per block in prefix order
        (system, then messages); each cache_control block ends a cacheable prefix."""
        blocks: list[tuple[str, bool]] = []
        system = body.get("system")
        if isinstance(system, str):
            blocks.append(("system\0" + system, False))
        elif isinstance(system, list):
            blocks.extend(("system\0" + b["text"], "cache_control" in b) for b in system)
        for message in body["messages"]:
            content = message["content"]
            role = message["role"]
            if isinstance(content, str):
                blocks.append((f"{role}\0{content}", False))
            else:
                blocks.extend((f"{role}\0{_block_text(b)}", "cache_control" in b) for b in content)
        digest = hashlib.sha256(str(body["model"]).encode())
        total = 0
        breakpoints: list[tuple[int, str]] = []  # (prefix tokens, prefix digest)
        for text, cached in blocks:
            digest.update(text.encode())
            digest.update(b"\1")
            total += _tokens(text.split("\0", 1)[1])
            if cached and total >= self.min_cache_tokens:
                breakpoints.append((total, digest.hexdigest()))
        now = time.monotonic()
        with self._lock:
            read = max((t for t, d in breakpoints if self._cache.get(d, 0.0) > now), default=0)
            longest = max((t for t, _ in breakpoints), default=0)
            write = max(longest - read, 0)
            for _, d in breakpoints:
                self._cache[d] = now + self.cache_ttl  # a hit refreshes the TTL, as the API does
        return {
            "input_tokens": max(total - read - write, 0),
            "output_tokens": 0,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0},
            "service_tier": "standard",
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cardloop.scripted_model",
        description="Serve a scripted Anthropic Messages API on 127.0.0.1 (a test double for demos).",
    )
    parser.add_argument("transcript", nargs="?", help="transcript JSON: {stage: [reply, ...]}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every answer")
    args = parser.parse_args(argv)
    try:
        transcript = load_transcript(args.transcript) if args.transcript else {}
    except TranscriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    model = ScriptedModel(transcript, host=args.host, port=args.port, latency=args.latency)
    with model:
        print(f"ScriptedModel listening on {model.url} (ANTHROPIC_BASE_URL={model.url}); Ctrl-C stops it",
              flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
