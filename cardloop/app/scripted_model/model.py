"""ScriptedModel itself: its lifecycle, the fault queue tests fill, and the answer to one request
(scripted reply or summary, plausible usage with a prompt-cache model)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cardloop.app.scripted_model.research import research_reply
from cardloop.app.scripted_model.server import Server
from cardloop.app.scripted_model.summary import SUMMARY_HEADING, summarize
from cardloop.app.scripted_model.transcript import check_transcript, normalize_stage
from cardloop.app.scripted_model.validation import validate_request
from cardloop.app.scripted_model.wire import (
    MESSAGES_PATH,
    MODELS_PATH,
    Answer,
    block_text,
    count_tokens,
    error_answer,
    invalid_answer,
    models_answer,
    new_id,
    system_text_blocks,
)

_STAGE_LINE = re.compile(r"^# Stage:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


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


class ScriptedModel:
    """See the package docstring (__init__.py). Thread-safe; one instance per test or demo."""

    def __init__(
        self,
        transcript: Mapping[str, Sequence[Any]] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        chunk_delay: float = 0.0,
        api_key: str | None = None,
        min_cache_tokens: int = 1024,
        cache_ttl: float = 300.0,
        unique: bool = False,
    ) -> None:
        self.transcript = check_transcript(transcript or {}, "transcript")
        self.host = host
        self.port = port
        self.latency = latency
        # Seconds slept between the text deltas of a streamed answer (the first leaves after `latency`).
        self.chunk_delay = chunk_delay
        # None: any non-empty key is accepted; a value: only that key (others get 401).
        self.api_key = api_key
        self.min_cache_tokens = min_cache_tokens
        self.cache_ttl = cache_ttl
        # Every text reply starts "[call N] " (N counts answered message requests from 1), so a
        # reply names the call that produced it: chaos runs tell a re-made call from a stored one.
        self.unique = unique
        self._answered = 0
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._requests: list[RecordedRequest] = []
        self._stage_counts: dict[str, int] = {}
        self._cache: dict[str, float] = {}  # prefix digest -> expiry (monotonic)
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: Server | None = None
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
        self._server = Server((self.host, self.port), self)
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
            self._answered = 0

    # -- request handling (runs on the server's handler threads) --

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopped meanwhile; False when the server is stopping."""
        if seconds > 0:
            self._stopping.wait(seconds)
        return not self._stopping.is_set()

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer | None:
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
            answer = error_answer(fault.status, fault.message, fault.error_type)
            if fault.retry_after is not None:
                value = fault.retry_after
                answer.headers["retry-after"] = (
                    str(int(value)) if isinstance(value, float | int) and float(value).is_integer() else str(value)
                )
            answer.headers.update(fault.headers)
            return answer
        if route not in (MESSAGES_PATH, MODELS_PATH):
            return error_answer(404, f"Not found: {method} {route}", "not_found_error")
        if method != ("GET" if route == MODELS_PATH else "POST"):
            return error_answer(405, f"Method not allowed: {method}", "invalid_request_error")
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not key:
            return error_answer(401, "x-api-key header is required", "authentication_error")
        if self.api_key is not None and key != self.api_key:
            return error_answer(401, "invalid x-api-key", "authentication_error")
        if route == MODELS_PATH:
            return models_answer()
        if not headers.get("anthropic-version"):
            return invalid_answer("anthropic-version: header is required")
        if not parsed:
            return invalid_answer("There was an error parsing the body of your request: invalid JSON")
        problem = validate_request(body, headers["anthropic-version"].strip())
        if problem:
            return invalid_answer(problem)
        answer = self._reply(body, fault.content if fault is not None else None)
        if body.get("stream"):
            answer.stream = True
            answer.chunk_delay = (fault.chunk_delay if fault is not None and fault.chunk_delay is not None
                                  else self.chunk_delay)
        return answer

    def _reply(self, body: Mapping[str, Any], content: Sequence[Mapping[str, Any]] | None = None) -> Answer:
        system_texts = system_text_blocks(body.get("system"))
        messages = body["messages"]
        usage = self._usage(body)
        stop_reason = "end_turn"
        scripted: str | list[Any] | None = None
        research = research_reply(system_texts, messages) if content is None else None
        if research is not None:
            scripted = research
            if isinstance(research, list):
                content = research
        elif content is None and not any(t.lstrip().startswith(SUMMARY_HEADING) for t in system_texts):
            scripted = self._scripted_reply(system_texts)
            if isinstance(scripted, list):
                content = scripted  # a transcript reply given as content blocks (tool_use turns)
        if content is not None:
            blocks = [dict(b) for b in content]
            for b in blocks:
                if b.get("type") == "tool_use" and not b.get("id"):
                    b["id"] = new_id("toolu_")
            if any(b.get("type") == "tool_use" for b in blocks):
                stop_reason = "tool_use"
            usage["output_tokens"] = max(sum(count_tokens(json.dumps(b)) for b in blocks), 1)
        else:
            text = summarize(messages) if scripted is None else str(scripted)
            if self.unique:
                with self._lock:
                    self._answered += 1
                    text = f"[call {self._answered}] {text}"
            max_tokens = body["max_tokens"]
            if count_tokens(text) > max_tokens:
                text, stop_reason = text[: max_tokens * 4], "max_tokens"
            usage["output_tokens"] = max(count_tokens(text), 1)
            blocks = [{"type": "text", "text": text}] if text else []
        request_id = new_id("req_")
        return Answer(200, {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }, {"request-id": request_id})

    def _scripted_reply(self, system_texts: list[str]) -> str | list[Any]:
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
                # Where the breakpoints sit is not part of the prefix: the marker is dropped.
                blocks.extend((f"{role}\0{block_text(_unmarked(b))}", "cache_control" in b) for b in content)
        digest = hashlib.sha256(str(body["model"]).encode())
        total = 0
        breakpoints: list[tuple[int, str]] = []  # (prefix tokens, prefix digest)
        for text, cached in blocks:
            digest.update(text.encode())
            digest.update(b"\1")
            total += count_tokens(text.split("\0", 1)[1])
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


def _unmarked(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, Mapping) else block
