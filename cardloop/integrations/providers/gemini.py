"""Gemini generateContent over plain httpx (REST, key in the x-goog-api-key header so it
never lands in a URL, a log line or an error message)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from cardloop.integrations.providers.base import Completion, Usage
from cardloop.integrations.providers.errors import bad_response, classify_status, parse_duration, redact
from cardloop.integrations.providers.http import as_int, error_details, http_timeout, post_json, ssl_context
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.conversation import Conversation, ToolUse
from cardloop.prompts.formats.render import render

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"

# finishReason in Anthropic's words, so callers check one vocabulary.
_STOP_REASONS = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
}
_DETAIL = "type.googleapis.com/google.rpc."


class GeminiProvider:
    name = "gemini"

    def __init__(self, *, base_url: str | None = None, api_key: str, timeout: float = 600.0) -> None:
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self._api_key = api_key
        self._client = httpx.Client(timeout=http_timeout(timeout), verify=ssl_context())

    def __repr__(self) -> str:
        return f"GeminiProvider(base_url={self.base_url!r}, timeout={self.timeout!r})"

    def close(self) -> None:
        self._client.close()

    def complete(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Completion:
        body: dict[str, Any] = render(  # type: ignore[assignment]  # dict formats return dicts
            conversation, "gemini", max_tokens=max_tokens, temperature=temperature
        )
        name = model.removeprefix("models/")
        url = f"{self.base_url}/models/{quote(name, safe='-._~')}:generateContent"
        data = post_json(self._client, url, body, provider=self.name, headers={"x-goog-api-key": self._api_key},
                         timeout=self.timeout, secret=self._api_key, classify=self._classify)
        candidates = data.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            feedback = data.get("promptFeedback") if isinstance(data.get("promptFeedback"), dict) else {}
            reason = feedback.get("blockReason")
            if reason:
                # The same prompt is refused again on a retry: fail the turn, not the budget.
                raise UpstreamError(f"{self.name}: prompt blocked: {reason}", kind="blocked", retryable=False,
                                    status=200)
            raise bad_response(self.name, "no candidates in the response", 200)
        candidate = candidates[0] if isinstance(candidates[0], dict) else {}
        content = candidate.get("content") if isinstance(candidate.get("content"), dict) else {}
        parts = content.get("parts") if isinstance(content.get("parts"), list) else []
        # Thought summaries (thinking models) are not the answer.
        text = "".join(p["text"] for p in parts
                       if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought"))
        calls = _function_calls(parts)
        finish = candidate.get("finishReason")
        meta = data.get("usageMetadata") if isinstance(data.get("usageMetadata"), dict) else {}
        cached = as_int(meta.get("cachedContentTokenCount"))
        return Completion(
            text=text,
            usage=Usage(
                # promptTokenCount includes the cached part; Usage.input_tokens does not (see Usage).
                input_tokens=max(as_int(meta.get("promptTokenCount")) - cached, 0),
                # Thinking tokens are billed as output.
                output_tokens=as_int(meta.get("candidatesTokenCount")) + as_int(meta.get("thoughtsTokenCount")),
                cache_read_tokens=cached,
            ),
            # Gemini ends a turn that calls functions with STOP: say tool_use, as the others do.
            stop_reason="tool_use" if calls and finish == "STOP"
            else _STOP_REASONS.get(finish, finish.lower()) if isinstance(finish, str) else None,
            model=data.get("modelVersion") if isinstance(data.get("modelVersion"), str) else model,
            response_id=data.get("responseId") if isinstance(data.get("responseId"), str) else None,
            tool_calls=calls,
        )

    def _classify(self, status: int, body: Any, text: str, headers: Mapping[str, str]) -> UpstreamError | None:
        """Gemini puts what matters in error.details: RetryInfo (how long a quota needs) and
        ErrorInfo (API_KEY_INVALID arrives as a 400, but it is an auth failure)."""
        message, code = error_details(body, text)
        message = redact(message, self._api_key)
        err = body.get("error") if isinstance(body, dict) else None
        details = err.get("details") if isinstance(err, dict) and isinstance(err.get("details"), list) else []
        retry_hint: float | None = None
        reasons: set[str] = set()
        for item in details:
            if not isinstance(item, dict):
                continue
            kind = str(item.get("@type", ""))
            if kind == _DETAIL + "RetryInfo" and isinstance(item.get("retryDelay"), str):
                retry_hint = parse_duration(item["retryDelay"])
            elif kind == _DETAIL + "ErrorInfo" and isinstance(item.get("reason"), str):
                reasons.add(item["reason"])
        error = classify_status(status, message, headers, provider=self.name, code=code, retry_hint=retry_hint)
        if status == 400 and ("API_KEY_INVALID" in reasons or "API key not valid" in message):
            return UpstreamError(error.message, kind="auth", retryable=False, status=status)
        return error


def _function_calls(parts: list[Any]) -> tuple[ToolUse, ...]:
    """functionCall parts; Gemini gives an id only sometimes, so one is made from the position
    and a random part: ids must differ across the card's turns, or a result of an earlier turn's
    call answers a later call that has none (history.settle_tool_calls), and the request is refused."""
    out: list[ToolUse] = []
    turn = secrets.token_hex(4)
    for i, part in enumerate(parts):
        call = part.get("functionCall") if isinstance(part, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            continue
        ident = (call.get("id") if isinstance(call.get("id"), str) and call.get("id")
                 else f"call_{i}_{call['name']}_{turn}")
        out.append(ToolUse(ident, call["name"], call.get("args") if isinstance(call.get("args"), dict) else {}))
    return tuple(out)
