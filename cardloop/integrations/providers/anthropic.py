"""Anthropic Messages API through the official SDK.

The SDK's own retries are off (max_retries=0): Temporal retries the activity, with the
delay this module reads from the response (UpstreamError.retry_after).

Temperature: the SDK decides the API version (the anthropic-version header). SDK 2.x sends
2026-10-21, where the API rejects temperature/top_p/top_k ("Extra inputs are not permitted")
and the SDK has no argument for them; with such an SDK `temperature` is dropped (logged once).
Older SDKs (API 2023-06-01) still get it.

stream() is complete() as events (StreamStart, TextDelta..., the Completion), through the SDK's
messages.stream(); a failure before or during the stream is the same UpstreamError.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from typing import Any

import anthropic

try:  # The SDK's HTTP stack: anthropic 2.x runs on httpx2, earlier versions on httpx.
    import httpx2 as sdk_http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as sdk_http  # type: ignore[no-redef]

from cardloop.integrations.providers.base import Completion, StreamEvent, StreamStart, TextDelta, Usage
from cardloop.integrations.providers.errors import (
    bad_response,
    classify_status,
    connection_error,
    missing_key,
    redact,
    timeout_error,
)
from cardloop.integrations.providers.http import CONNECT_TIMEOUT
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.conversation import Conversation, ToolUse
from cardloop.prompts.formats.render import render

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
        params = self._params(conversation, model=model, max_tokens=max_tokens, temperature=temperature)
        try:
            message = self._client.messages.create(**params, timeout=self._timeout)
        except anthropic.APIError as exc:
            raise self._error(exc) from None
        return _completion(message, model)

    def stream(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Iterator[StreamEvent]:
        """The turn as it is produced: StreamStart, then TextDelta per text delta, then the Completion.

        The deltas joined are the Completion's text (blocks separated by a newline); tool calls
        arrive as JSON fragments and are only in the final Completion's tool_calls.
        """
        params = self._params(conversation, model=model, max_tokens=max_tokens, temperature=temperature)
        sent = ""
        started: set[int] = set()  # content blocks that have produced text
        try:
            with self._client.messages.stream(**params, timeout=self._timeout) as events:
                for event in events:
                    if event.type == "message_start":
                        start = event.message
                        yield StreamStart(_usage(start.usage), start.model or model, start.id)
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                        text = event.delta.text
                        if not text:
                            continue
                        if event.index not in started:
                            started.add(event.index)
                            if sent:
                                text = "\n" + text  # reply_text's separator between blocks
                        sent += text
                        yield TextDelta(text)
                message = events.get_final_message()
        except anthropic.APIError as exc:
            # An `event: error` in the stream arrives as APIStatusError too, with the API's body.
            raise self._error(exc) from None
        except sdk_http.TimeoutException:
            # Mid-stream the SDK does not wrap httpx's errors: same kinds as before the stream.
            raise timeout_error(self.name, self.timeout) from None
        except sdk_http.TransportError as exc:
            raise connection_error(self.name, redact(f"{type(exc).__name__}: {exc}", self._api_key)) from None
        except (sdk_http.HTTPError, ValueError) as exc:
            # An event the SDK cannot read (ValueError covers pydantic's ValidationError).
            raise bad_response(self.name, redact(f"{type(exc).__name__}: {exc}", self._api_key)) from None
        done = _completion(message, model)
        if done.text != sent:
            logger.warning("anthropic stream %s: streamed text differs from the final message", done.response_id)
        yield done

    def _params(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> dict[str, Any]:
        if temperature is not None and not SDK_TAKES_TEMPERATURE:
            _note_dropped_temperature()
            temperature = None
        return render(  # type: ignore[return-value]  # dict formats return dicts
            conversation, "anthropic", model=model, max_tokens=max_tokens, temperature=temperature
        )

    def _error(self, exc: anthropic.APIError) -> UpstreamError:
        """complete()'s and stream()'s one classification of the SDK's errors."""
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc)
        if isinstance(exc, anthropic.APITimeoutError):
            # Before APIConnectionError: the SDK's timeout is a subclass of it.
            return timeout_error(self.name, self.timeout)
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            return connection_error(self.name, redact(detail, self._api_key))
        # APIResponseValidationError and friends: a 2xx that is not a Message.
        return bad_response(self.name, redact(exc.message, self._api_key))

    def _status_error(self, exc: anthropic.APIStatusError) -> UpstreamError:
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


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
    )


def _completion(message: Any, model: str) -> Completion:
    return Completion(
        text=reply_text(message.content),
        usage=_usage(message.usage),
        stop_reason=message.stop_reason,
        model=message.model or model,
        response_id=message.id,
        tool_calls=tool_calls(message.content),
    )


def _note_dropped_temperature() -> None:
    global _warned_temperature
    if not _warned_temperature:
        _warned_temperature = True
        logger.info("anthropic SDK %s sends API version %s, which takes no temperature: not sent",
                    anthropic.__version__,
                    getattr(getattr(anthropic, "_constants", None), "ANTHROPIC_API_VERSION", "?"))


def reply_text(content: Any) -> str:
    """The reply's text blocks, joined by newlines (tool calls are in tool_calls())."""
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text" and block.text)


def tool_calls(content: Any) -> tuple[ToolUse, ...]:
    """The reply's tool_use blocks, in order."""
    return tuple(ToolUse(block.id, block.name, dict(getattr(block, "input", None) or {}))
                 for block in content if getattr(block, "type", None) == "tool_use")
