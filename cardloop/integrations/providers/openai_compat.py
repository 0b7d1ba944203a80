"""OpenAI chat completions over plain httpx: OpenAI itself and the compatible servers
(vLLM, Ollama, LiteLLM) that the `openai` format's aliases name."""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx

from cardloop.integrations.providers.base import Completion, Usage
from cardloop.integrations.providers.errors import bad_response
from cardloop.integrations.providers.http import as_int, http_timeout, post_json, ssl_context
from cardloop.prompts.conversation import Conversation, ToolUse
from cardloop.prompts.formats.render import render

DEFAULT_BASE_URL = "https://api.openai.com/v1"

# finish_reason in Anthropic's words, so callers check one vocabulary.
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "tool_calls": "tool_use",
                 "function_call": "tool_use"}


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 600.0) -> None:
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self._api_key = api_key or None
        self._client = httpx.Client(timeout=http_timeout(timeout), verify=ssl_context())

    def __repr__(self) -> str:
        return f"OpenAICompatProvider(base_url={self.base_url!r}, timeout={self.timeout!r})"

    def close(self) -> None:
        self._client.close()

    def complete(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Completion:
        params: dict[str, Any] = render(  # type: ignore[assignment]  # dict formats return dicts
            conversation, "openai", model=model, max_tokens=max_tokens, temperature=temperature
        )
        # Local servers (Ollama, vLLM without --api-key) take no key: send no header then.
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        data = post_json(self._client, f"{self.base_url}/chat/completions", params, provider=self.name,
                         headers=headers, timeout=self.timeout, secret=self._api_key)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad_response(self.name, "no choices in the chat completion", 200)
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        finish = choice.get("finish_reason")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        # prompt_tokens includes the cached part; Usage.input_tokens does not (see Usage).
        # DeepSeek reports its cache hits as prompt_cache_hit_tokens instead.
        cached = as_int(details.get("cached_tokens")) or as_int(usage.get("prompt_cache_hit_tokens"))
        prompt = as_int(usage.get("prompt_tokens"))
        return Completion(
            text=_content_text(message.get("content")),
            usage=Usage(
                input_tokens=max(prompt - cached, 0),
                output_tokens=as_int(usage.get("completion_tokens")),
                cache_read_tokens=cached,
            ),
            stop_reason=_STOP_REASONS.get(finish, finish.lower()) if isinstance(finish, str) else None,
            model=data.get("model") if isinstance(data.get("model"), str) else model,
            response_id=data.get("id") if isinstance(data.get("id"), str) else None,
            tool_calls=_tool_calls(message.get("tool_calls")),
        )


def _content_text(content: Any) -> str:
    # Usually a string; some servers answer with a list of typed parts; a refusal has null.
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _tool_calls(calls: Any) -> tuple[ToolUse, ...]:
    """assistant.tool_calls: arguments arrive as a JSON string; one that is not a JSON object is
    kept under "_invalid_arguments" so the tool refuses it with a reason the model can read."""
    out: list[ToolUse] = []
    turn = secrets.token_hex(4)  # for a server that gives no ids: unique across turns (see gemini.py)
    for i, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
        except ValueError:
            args = None
        if not isinstance(args, dict):
            args = {"_invalid_arguments": raw}
        ident = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{i}_{turn}"
        out.append(ToolUse(ident, function["name"], args))
    return tuple(out)
