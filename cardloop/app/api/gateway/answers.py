"""Whole answers in the caller's protocol: the OpenAI chat.completion or Anthropic message body,
usage in each protocol's words, errors in each protocol's error shape, and the headers every
answer carries (the warnings header)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse

from cardloop.app.api.gateway.models import GatewayError, Outcome, Protocol

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error", 504: "timeout_error",
}
# x-cardloop-warnings at most: proxies refuse a response whose headers pass 8 KB or so, and a
# warning can quote the caller's own words (an unknown block type) at any length.
WARNINGS_HEADER_CHARS = 1024
_WARNING_CHARS = 200  # one warning at most, the rest cut to "..."
_MORE_ROOM = 24  # kept free for the last item, "and N more"
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
# Completion.stop_reason speaks Anthropic's words; OpenAI-compatible words are accepted too.
_TO_OPENAI_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "content_filter",
                     "stop": "stop", "length": "length", "content_filter": "content_filter"}
_TO_ANTHROPIC_STOP = {"end_turn": "end_turn", "stop_sequence": "stop_sequence", "max_tokens": "max_tokens",
                      "refusal": "refusal", "stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def error_response(protocol: Protocol, exc: GatewayError, call_id: str) -> JSONResponse:
    headers = {"x-cardloop-call-id": f"gateway/{call_id}"}
    if exc.retry_after is not None:
        headers["retry-after"] = str(max(math.ceil(exc.retry_after), 0))
    if protocol == "openai":
        kind = ("invalid_request_error" if exc.status < 500 and exc.status != 429
                else "rate_limit_error" if exc.status == 429 else "server_error")
        body: dict[str, Any] = {"error": {"message": exc.message, "type": kind, "param": exc.param,
                                          "code": exc.code}}
    else:
        # A server without its provider key is not "overloaded": nothing to wait out.
        kind = "api_error" if exc.code == "no_provider_key" else ANTHROPIC_ERROR_TYPES.get(exc.status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": exc.message},
                "request_id": f"gateway/{call_id}"}
    return JSONResponse(body, status_code=exc.status, headers=headers)


def openai_finish_reason(stop_reason: str | None) -> str:
    # The gateway offers no tools (the request's are ignored), so "tool_calls" would promise a field never sent.
    return _TO_OPENAI_FINISH.get(stop_reason or "", "stop")


def anthropic_stop_reason(stop_reason: str | None) -> str:
    # tool_use likewise: the answer holds no tool_use block, so the turn simply ended.
    return _TO_ANTHROPIC_STOP.get(stop_reason or "", "end_turn")


def openai_usage(outcome: Outcome) -> dict[str, Any]:
    u = outcome.completion.usage
    # prompt_tokens counts cached input too (OpenAI's meaning); Usage.input_tokens does not.
    prompt = u.total_input_tokens
    return {"prompt_tokens": prompt, "completion_tokens": u.output_tokens, "total_tokens": prompt + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens}}


def anthropic_usage(outcome: Outcome) -> dict[str, Any]:
    u = outcome.completion.usage
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_tokens, "cache_creation_input_tokens": u.cache_write_tokens}


def openai_body(outcome: Outcome, created: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{outcome.call_id}", "object": "chat.completion", "created": created, "model": outcome.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": outcome.completion.text},
                     "finish_reason": openai_finish_reason(outcome.completion.stop_reason)}],
        "usage": openai_usage(outcome),
    }


def anthropic_body(outcome: Outcome) -> dict[str, Any]:
    text = outcome.completion.text
    return {
        "id": f"msg_{outcome.call_id}", "type": "message", "role": "assistant", "model": outcome.model,
        # The API sends no empty text block; an empty answer is an empty content list.
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": anthropic_stop_reason(outcome.completion.stop_reason), "stop_sequence": None,
        "usage": anthropic_usage(outcome),
    }


def warnings_header(warnings: Sequence[str]) -> str | None:
    """The prompt core's warnings (a placeholder left for an image, a block dropped...) as the
    x-cardloop-warnings value, or None when there are none.

    An RFC 8941 list of strings, so a client can split it although warnings hold commas: each
    warning once, in order, with its count when repeated; printable ASCII only (a header
    cannot carry more, and CR/LF would end it), other characters as Python escapes ("\\xe9");
    at most WARNINGS_HEADER_CHARS long, the warnings that did not fit counted at the end."""
    items = [_sf_string(text, n) for text, n in Counter(warnings).items()]
    kept: list[str] = []
    used = 0
    for i, item in enumerate(items):
        if used + len(item) + 2 > WARNINGS_HEADER_CHARS - _MORE_ROOM:
            kept.append(_sf_string(f"and {len(items) - i} more"))
            break
        kept.append(item)
        used += len(item) + 2
    return ", ".join(kept) or None


def _sf_string(text: str, times: int = 1) -> str:
    """`text` as an RFC 8941 string: made printable ASCII, cut to _WARNING_CHARS, then escaped
    (after the cut, so that a cut never splits an escape)."""
    text = _NOT_PRINTABLE_ASCII.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    if len(text) > _WARNING_CHARS:
        text = text[:_WARNING_CHARS - 3] + "..."
    if times > 1:
        text += f" ({times} times)"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
