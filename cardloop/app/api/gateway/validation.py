"""Reading a request: the body validated by hand, so a malformed one is a 400 in the caller's own
error shape (FastAPI's validation errors would answer 422 in neither)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cardloop.app.api.gateway.models import GatewayCall, Protocol, invalid
from cardloop.prompts.surrogates import find_surrogate

_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ANTHROPIC_ROLES = frozenset({"user", "assistant"})
# Request parameters the gateway knows and cannot honour: named back to the caller in a header.
_IGNORED = {
    "openai": ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "stop", "top_p",
               "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
               "response_format", "reasoning_effort", "modalities", "audio", "prediction", "user", "metadata",
               "store", "service_tier"),
    "anthropic": ("tools", "tool_choice", "stop_sequences", "top_p", "top_k", "thinking", "metadata",
                  "service_tier", "container", "mcp_servers", "output_config"),
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_request(raw: bytes, protocol: Protocol) -> GatewayCall:
    """Parse and validate a request body; GatewayError(400) names the first problem."""
    try:
        # NaN/Infinity are not JSON, and a NaN temperature would slip past every range check.
        body = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise invalid("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise invalid("request body must be a JSON object")
    # An unpaired "\ud800" escape parses into a lone surrogate: no provider (or log) can encode it.
    if (broken := find_surrogate(body)) is not None:
        raise invalid(broken, broken.partition(":")[0].partition(" ")[0])
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid("model: must be a string", "model")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    messages = body.get("messages")
    if messages is None:
        raise invalid("messages: field required", "messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: must be a non-empty list", "messages")
    ignored = tuple(k for k in _IGNORED[protocol] if body.get(k) is not None)
    if protocol == "openai":
        return _read_openai(body, messages, model, bool(stream), ignored)
    return _read_anthropic(body, messages, model, bool(stream), ignored)


def _int_field(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise invalid(f"{name}: must be an integer >= 1", name)
    return value


def _temperature(body: Mapping[str, Any], top: float) -> float | None:
    value = body.get("temperature")
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= top:
        raise invalid(f"temperature: must be a number between 0 and {top:g}", "temperature")
    return float(value)


# What a content part of each type must carry for the prompt core to read it as the caller meant
# (a dotted name is a field of a nested object, checked after its parent). Without these, a
# text part whose text is a number became "[text]" and a tool call without its function
# "[tool_call  id=a]": sent altered, or refused by the provider after counting against the
# tenant's limits. Other types are read as the prompt core reads them (kept as text, or a
# placeholder with a warning).
_STR, _OBJECT = (str, "a string"), (dict, "an object")
_PART_FIELDS: dict[str, tuple[tuple[str, tuple[type, str]], ...]] = {
    "text": (("text", _STR),),
    "input_text": (("text", _STR),),
    "output_text": (("text", _STR),),
    "refusal": (("refusal", _STR),),
    "image_url": (("image_url", _OBJECT), ("image_url.url", _STR)),
    "image": (("source", _OBJECT),),
    "document": (("source", _OBJECT),),
    "tool_use": (("id", _STR), ("name", _STR), ("input", _OBJECT)),
    "tool_result": (("tool_use_id", _STR),),
}
_FUNCTION = (("name", _STR), ("arguments", _STR))  # OpenAI's function of a tool call
_MISSING = object()


def _field(value: Mapping[str, Any], dotted: str) -> Any:
    for name in dotted.split("."):
        value = value.get(name, _MISSING) if isinstance(value, Mapping) else _MISSING
    return value


def _check_fields(value: Mapping[str, Any], fields: tuple[tuple[str, tuple[type, str]], ...], where: str) -> None:
    for name, (kind, words) in fields:
        found = _field(value, name)
        if not isinstance(found, kind):
            param = f"{where}.{name}"
            raise invalid(f"{param}: {'field required' if found is _MISSING else 'must be ' + words}", param)


def _check_parts(content: list[Any], where: str) -> None:
    for j, part in enumerate(content):
        at = f"{where}.{j}"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise invalid(f"{at}: must be an object with a string 'type'", at)
        _check_fields(part, _PART_FIELDS.get(part["type"], ()), at)
        inner = part.get("content")  # a tool_result's own blocks
        if part["type"] == "tool_result" and inner is not None:
            if isinstance(inner, list):
                _check_parts(inner, f"{at}.content")
            elif not isinstance(inner, str):
                raise invalid(f"{at}.content: must be a string or a list of content blocks", f"{at}.content")


def _check_tool_calls(message: Mapping[str, Any], where: str) -> None:
    """An OpenAI message's tool_calls (and the older function_call): an assistant's, each a
    function call with its name and arguments, as the API requires."""
    calls, legacy = message.get("tool_calls"), message.get("function_call")
    if (calls is not None or legacy is not None) and message.get("role") != "assistant":
        param = f"{where}.{'tool_calls' if calls is not None else 'function_call'}"
        raise invalid(f"{param}: only an assistant message has tool calls", param)
    if legacy is not None:
        if not isinstance(legacy, dict):
            raise invalid(f"{where}.function_call: must be an object", f"{where}.function_call")
        _check_fields(legacy, _FUNCTION, f"{where}.function_call")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise invalid(f"{where}.tool_calls: must be a list of tool calls", f"{where}.tool_calls")
    for k, call in enumerate(calls):
        at = f"{where}.tool_calls.{k}"
        if not isinstance(call, dict):
            raise invalid(f"{at}: must be an object", at)
        if call.get("type", "function") != "function":
            # A custom tool's call has no function: the gateway could carry only its id.
            raise invalid(f"{at}.type: must be 'function' (the only tool calls this gateway carries)", f"{at}.type")
        _check_fields(call, (("id", _STR), ("function", _OBJECT)), at)
        _check_fields(call["function"], _FUNCTION, f"{at}.function")


def _read_openai(body: dict[str, Any], messages: list[Any], model: str | None, stream: bool,
                 ignored: tuple[str, ...]) -> GatewayCall:
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise invalid(f"{where}: must be an object", where)
        role = message.get("role")
        # isinstance first: a list or an object is no member of a set (hashing it raises).
        if not isinstance(role, str) or role not in _OPENAI_ROLES:
            raise invalid(f"{where}.role: must be one of {', '.join(sorted(_OPENAI_ROLES))}", f"{where}.role")
        content = message.get("content")
        if isinstance(content, list):
            _check_parts(content, f"{where}.content")
        elif not isinstance(content, str) and not (content is None and role == "assistant"):
            raise invalid(f"{where}.content: must be a string or a list of content parts", f"{where}.content")
        _check_tool_calls(message, where)
    n = body.get("n")
    if n is not None and n != 1:
        raise invalid("n: only 1 is supported by this gateway", "n")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid("stream_options: must be an object", "stream_options")
    # max_completion_tokens is the current name, max_tokens the deprecated one: the newer wins.
    newer, older = _int_field(body, "max_completion_tokens"), _int_field(body, "max_tokens")
    max_tokens = newer or older
    return GatewayCall("openai", {"messages": messages}, model, max_tokens, _temperature(body, 2.0), stream,
                       bool(options and options.get("include_usage") is True), ignored)


def _read_anthropic(body: dict[str, Any], messages: list[Any], model: str | None, stream: bool,
                    ignored: tuple[str, ...]) -> GatewayCall:
    max_tokens = _int_field(body, "max_tokens")
    if max_tokens is None:
        raise invalid("max_tokens: Field required", "max_tokens")  # required by the Messages API too
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise invalid("system: must be a string or a list of text blocks", "system")
        for j, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise invalid(f"system.{j}: must be a text block", "system")
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise invalid(f"{where}: must be an object", where)
        if not isinstance(message.get("role"), str) or message["role"] not in _ANTHROPIC_ROLES:
            raise invalid(f"{where}.role: must be 'user' or 'assistant'", f"{where}.role")
        content = message.get("content")
        if isinstance(content, list):
            _check_parts(content, f"{where}.content")
        elif not isinstance(content, str):
            raise invalid(f"{where}.content: must be a string or a list of content blocks", f"{where}.content")
    # Only what intercept should read: a stray "contents" key must not make it a Gemini request.
    parsed: dict[str, Any] = {"messages": messages}
    if system is not None:
        parsed["system"] = system
    return GatewayCall("anthropic", parsed, model, max_tokens, _temperature(body, 1.0), stream, False, ignored)
