"""Request validation: the scripted model refuses what the real API refuses where our code could get
it wrong, so a bug shows up in tests instead of against the real API."""

from __future__ import annotations

import re
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
    problem = _check_tools(body.get("tools")) or _check_tool_pairs(messages)
    if problem:
        return problem
    last = messages[-1]
    if last["role"] == "assistant":
        prefill = content_text(last.get("content"))
        if prefill != prefill.rstrip():
            return "messages: final assistant content cannot end with trailing whitespace"
    found = _count_cache_control(body)
    if found > MAX_CACHE_CONTROL:
        return f"A maximum of {MAX_CACHE_CONTROL} blocks with cache_control may be provided. Found {found}."
    return None


_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")


def _check_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            return f"tools.{i}: Input should be a valid dictionary"
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if name in seen:
            return "tools: Tool names must be unique."
        seen.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping):
            return f"tools.{i}.custom.input_schema: Field required"
        if schema.get("type") != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    return None


def _blocks(message: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def _check_tool_pairs(messages: list[Any]) -> str | None:
    """Every tool_use is answered by a tool_result in the next message, and every tool_result
    answers a tool_use of the message before it (the API's rules, in its words)."""
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message, "tool_use")):
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                return f"messages.{i}.content.{j}.tool_use: id and name are required"
            if not isinstance(block.get("input"), Mapping):
                return f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
        results = _blocks(message, "tool_result")
        if results:
            if message.get("role") != "user":
                return f"messages.{i}: tool_result blocks are only allowed in user messages"
            asked = {b.get("id") for b in _blocks(messages[i - 1], "tool_use")} if i else set()
            for block in results:
                if block.get("tool_use_id") not in asked:
                    return (f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in the previous message.")
        if message.get("role") == "assistant" and i + 1 < len(messages):
            answered = {b.get("tool_use_id") for b in _blocks(messages[i + 1], "tool_result")}
            missing = [b["id"] for b in _blocks(message, "tool_use") if b["id"] not in answered]
            if missing:
                return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message.")
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
