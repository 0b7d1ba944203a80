"""Request validation: the scripted model refuses what the real API refuses where our code could get
it wrong, so a bug shows up in tests instead of against the real API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.app.scripted_model.wire import content_text

MAX_CACHE_CONTROL = 4
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
        prefill = content_text(last.get("content"))
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
