"""Streamed answers as server-sent events in the caller's protocol: a live provider stream
forwarded delta by delta, or a finished answer replayed in chunks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from cardloop.app.api.gateway.answers import (
    ANTHROPIC_ERROR_TYPES,
    anthropic_body,
    anthropic_stop_reason,
    anthropic_usage,
    openai_finish_reason,
    openai_usage,
)
from cardloop.app.api.gateway.models import LiveStream, Outcome, logger
from cardloop.app.api.gateway.provider import live_events
from cardloop.integrations.providers import Completion

# Characters per streamed delta, at most (cut at whitespace): small enough to look like a stream.
STREAM_CHUNK_CHARS = 48


def text_chunks(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """`text` in pieces of about `size` characters, cut after whitespace where possible; joined, the same text."""
    chunks: list[str] = []
    current = ""
    for word in re.findall(r"\S+\s*|\s+", text):
        if current and len(current) + len(word) > size:
            chunks.append(current)
            current = ""
        while len(word) > size:  # one very long word (current is empty here): cut it into deltas too
            chunks.append(word[:size])
            word = word[size:]
        current += word
    if current:
        chunks.append(current)
    return chunks


def _data(payload: Any) -> str:
    return "data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n\n"


def openai_events(outcome: Outcome, created: int, include_usage: bool) -> Iterator[str]:
    base = {"id": f"chatcmpl-{outcome.call_id}", "object": "chat.completion.chunk", "created": created,
            "model": outcome.model}
    # With include_usage, OpenAI puts "usage": null on every chunk and the totals on one last chunk.
    extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    yield chunk({"role": "assistant", "content": ""})
    for piece in text_chunks(outcome.completion.text):
        yield chunk({"content": piece})
    yield chunk({}, openai_finish_reason(outcome.completion.stop_reason))
    if include_usage:
        yield _data({**base, "choices": [], "usage": openai_usage(outcome)})
    yield "data: [DONE]\n\n"


def _event(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\n" + _data({"type": name, **payload})


def anthropic_events(outcome: Outcome) -> Iterator[str]:
    usage = anthropic_usage(outcome)
    message = anthropic_body(outcome)
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 0}}
    yield _event("message_start", {"message": start})
    yield _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    yield _event("ping", {})
    for piece in text_chunks(outcome.completion.text):
        yield _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
    yield _event("content_block_stop", {"index": 0})
    yield _event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                   "usage": usage})
    yield _event("message_stop", {})


def live_openai_events(live: LiveStream, created: int, include_usage: bool) -> Iterator[str]:
    base = {"id": f"chatcmpl-{live.call_id}", "object": "chat.completion.chunk", "created": created,
            "model": live.model}
    extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    yield chunk({"role": "assistant", "content": ""})
    for item in live_events(live):
        if isinstance(item, str):
            yield chunk({"content": item})
        elif isinstance(item, Completion):
            yield chunk({}, openai_finish_reason(item.stop_reason))
            if include_usage:
                outcome = Outcome(item, live.call_id, live.model, 0)
                yield _data({**base, "choices": [], "usage": openai_usage(outcome)})
            yield "data: [DONE]\n\n"
        else:
            # OpenAI's own mid-stream failure: an error object on a data line, and no [DONE].
            yield _data({"error": {"message": item.message, "type": "server_error", "param": None,
                                   "code": item.code}})


def live_anthropic_events(live: LiveStream) -> Iterator[str]:
    started = Completion("", live.start.usage, None, live.start.model, live.start.response_id)
    usage = anthropic_usage(Outcome(started, live.call_id, live.model, 0))
    yield _event("message_start", {"message": {
        "id": f"msg_{live.call_id}", "type": "message", "role": "assistant", "model": live.model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 0}}})
    yield _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    yield _event("ping", {})
    for item in live_events(live):
        if isinstance(item, str):
            yield _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": item}})
        elif isinstance(item, Completion):
            yield _event("content_block_stop", {"index": 0})
            yield _event("message_delta", {
                "delta": {"stop_reason": anthropic_stop_reason(item.stop_reason), "stop_sequence": None},
                "usage": anthropic_usage(Outcome(item, live.call_id, live.model, 0))})
            yield _event("message_stop", {})
        else:
            # The API's own mid-stream failure event; the SDK raises it as an APIStatusError.
            yield _event("error", {"error": {"type": ANTHROPIC_ERROR_TYPES.get(item.status, "api_error"),
                                             "message": item.message}})


class LiveResponse(StreamingResponse):
    """A live stream's response: however it ends, its events and the provider's stream are closed
    and the call settled before the request is done.

    Starlette just stops pulling the events when the caller hangs up: closing them and settling
    the ledger row were otherwise left to garbage collection, and the row stayed "calling" (no
    tokens, so no cap counted the call)."""

    def __init__(self, events: Iterator[str], live: LiveStream, headers: Mapping[str, str]) -> None:
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self._events = events
        self._live = live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: a request cancelled as a whole must settle all the same. In a thread: it
            # writes to the store, and a worker thread pulling the events ran to its end first
            # (Starlette's pull is not abandoned on cancel), so nothing else runs the generator.
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(self._end)

    def _end(self) -> None:
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
        except Exception:  # the provider's connection failing to close must not skip the settling
            logger.exception("gateway/%s: closing the stream failed", self._live.call_id)
        self._live.ledger.close()
