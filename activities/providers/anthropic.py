"""Anthropic Messages API through the official SDK.

The SDK's own retries are off (max_retries=0): Temporal retries the activity, with the
delay this module reads from the response (ProviderError.retry_after).

Temperature: the SDK decides the API version (the anthropic-version header). SDK 2.x sends
2026-10-21, where the API rejects temperature/top_p/top_k ("Extra inputs are not permitted")
and the SDK has no argument for them; with such an SDK `temperature` is dropped (logged once).
Older SDKs (API 2023-06-01) still get it.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any

import anthropic

from activities.providers.base import (
    CONNECT_TIMEOUT,
    Completion,
    ProviderError,
    Usage,
    bad_response,
    classify_status,
    connection_error,
    missing_key,
    redact,
    timeout_error,
)
from prompts.conversation import Conversation
from prompts.formats.render import render

logger = logging.getLogger(__name__)


def _sdk_takes_temperature() -> bool:
    try:
        create = anthropic.resources.messages.Messages.create
        return "temperature" in inspect.signature(create).parameters
    except (AttributeError, TypeError, ValueError):
        return True  # cannot tell: send it, and a 400 says so plainly


SDK_TAKES_TEMPERATURE = _sdk_takes_temperature()
_warned_temperature = False


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None = None, timeout: float = 600.0) -> None:
        if not api_key:
            raise missing_key(self.name)
        self._api_key = api_key
        self.base_url = base_url or None
        self.timeout = timeout
        # An explicit Timeout also stops the SDK from refusing large non-streaming max_tokens
        # (its 10-minute guess applies only to its default timeout): the caller owns the budget.
        self._timeout = anthropic.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=self.base_url, timeout=self._timeout, max_retries=0
        )

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r}, timeout={self.timeout!r})"

    def close(self) -> None:
        self._client.close()

    def complete(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Completion:
        if temperature is not None and not SDK_TAKES_TEMPERATURE:
            _note_dropped_temperature()
            temperature = None
        params: dict[str, Any] = render(  # type: ignore[assignment]  # dict formats return dicts
            conversation, "anthropic", model=model, max_tokens=max_tokens, temperature=temperature
        )
        try:
            message = self._client.messages.create(**params, timeout=self._timeout)
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None
        except anthropic.APITimeoutError:
            # Before APIConnectionError: the SDK's timeout is a subclass of it.
            raise timeout_error(self.name, self.timeout) from None
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            raise connection_error(self.name, redact(detail, self._api_key)) from None
        except anthropic.APIError as exc:
            # APIResponseValidationError and friends: a 2xx that is not a Message.
            raise bad_response(self.name, redact(exc.message, self._api_key)) from None

        text = reply_text(message.content)
        usage = message.usage
        return Completion(
            text=text,
            usage=Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
                cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
            ),
            stop_reason=message.stop_reason,
            model=message.model or model,
            response_id=message.id,
        )

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        body = exc.body
        err = body.get("error") if isinstance(body, dict) else None
        api_message = getattr(exc, "api_message", None)
        if api_message is None and isinstance(err, dict) and isinstance(err.get("message"), str):
            api_message = err["message"]
        error_type = getattr(exc, "type", None)
        if error_type is None and isinstance(err, dict) and isinstance(err.get("type"), str):
            error_type = err["type"]
        if api_message is None:
            # Not the Anthropic error shape (a proxy's HTML page, say): keep a short piece of it.
            api_message = str(body)[:500] if body else f"HTTP {exc.status_code}"
        message = f"{error_type}: {api_message}" if error_type else api_message
        request_id = exc.response.headers.get("request-id")
        if request_id:
            message = f"{message} (request-id {request_id})"
        code = getattr(exc, "error_code", None) or error_type
        return classify_status(
            exc.status_code, redact(message, self._api_key), exc.response.headers, provider=self.name, code=code
        )


def _note_dropped_temperature() -> None:
    global _warned_temperature
    if not _warned_temperature:
        _warned_temperature = True
        logger.info("anthropic SDK %s sends API version %s, which takes no temperature: not sent",
                    anthropic.__version__,
                    getattr(getattr(anthropic, "_constants", None), "ANTHROPIC_API_VERSION", "?"))


def reply_text(content: Any) -> str:
    """The reply as text. Tool calls are kept as readable lines, never dropped, until the
    workspace tools (a later stage of the product) execute them."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "tool_use":
            args = json.dumps(getattr(block, "input", {}), ensure_ascii=False, sort_keys=True)
            parts.append(f"[tool_use {block.name} id={block.id}] {args}")
    return "\n".join(p for p in parts if p)
