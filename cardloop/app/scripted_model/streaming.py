"""The streaming wire format: a complete message replayed as the API's server-sent events, its text
cut into several deltas so tests can watch a stream arrive piece by piece."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

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
