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
from cardloop.integrations.providers.http import CONNECT_TIMEOUT, as_int
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.conversation import Conversation, ToolUse
from cardloop.prompts.formats.render import render

logger = logging.getLogger(__name__)

# The API's error types and the HTTP status each stands for. An error that arrives inside a 200
# (a stream's `event: error`, a gateway or proxy that answers 200 with the API's error body) is
# classified like the status its type names: an overloaded_error mid-stream is an overload to
# retry, not a refusal of the request.
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
# What the SDK raises on a body or event it cannot read: it builds its models without
# validation, so a 200 that is not a Message (invalid JSON, a list, an error body, no usage)
# fails later, as any of these. Each is the provider's malformed answer (bad_response, retried),
# never an unclassified failure that leaves the call's ledger row open.
_MALFORMED = (ValueError, TypeError, RuntimeError, AssertionError, LookupError, AttributeError)


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
            return self._completion(message, model)
        except anthropic.APIError as exc:
            raise self._error(exc) from None
        except _MALFORMED as exc:
            raise self._malformed(exc) from None

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
        stopped = False  # message_stop seen: the turn is whole
        try:
            with self._client.messages.stream(**params, timeout=self._timeout) as events:
                for event in events:
                    if event.type == "message_stop":
                        stopped = True
                    elif event.type == "message_start":
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
                if not stopped:
                    # The connection closed cleanly before the turn ended: the text so far is a
                    # fragment, never the answer (the SDK would hand back its partial snapshot).
                    raise bad_response(self.name, f"the stream ended before its message_stop event "
                                                  f"({len(sent):,} characters of text received)")
                message = events.get_final_message()
                done = self._completion(message, model)
        except anthropic.APIError as exc:
            # An `event: error` in the stream arrives as APIStatusError too, with the API's body.
            raise self._error(exc) from None
        except sdk_http.TimeoutException:
            # Mid-stream the SDK does not wrap httpx's errors: same kinds as before the stream.
            raise timeout_error(self.name, self.timeout) from None
        except sdk_http.TransportError as exc:
            raise connection_error(self.name, redact(f"{type(exc).__name__}: {exc}", self._api_key)) from None
        except sdk_http.HTTPError as exc:
            raise bad_response(self.name, redact(f"{type(exc).__name__}: {exc}", self._api_key)) from None
        except _MALFORMED as exc:
            # An event the SDK cannot read (ValueError covers pydantic's ValidationError), or events
            # out of order (a delta before message_start).
            raise self._malformed(exc) from None
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

    def _completion(self, message: Any, model: str) -> Completion:
        """The answer as a Completion; an answer that is not a Message raises (see _MALFORMED)."""
        if getattr(message, "type", None) == "error":
            err = getattr(message, "error", None)
            raise self._body_error(err if isinstance(err, dict) else {}, 200)
        if not isinstance(message, anthropic.types.Message) or not isinstance(message.content, list):
            raise bad_response(self.name, f"the body is not a Message: {redact(str(message), self._api_key)[:200]!r}",
                               200)
        if getattr(message, "usage", None) is None:
            # Billed by the provider all the same: the caller bills an estimate (base.with_usage).
            logger.warning("anthropic %s: the answer carries no usage", message.id)
        return _completion(message, model)

    def _malformed(self, exc: Exception) -> UpstreamError:
        return bad_response(self.name, redact(f"{type(exc).__name__}: {exc}", self._api_key)[:500])

    def _body_error(self, err: dict[str, Any], http_status: int) -> UpstreamError:
        """An error object of the API's shape that arrived with a 2xx status."""
        error_type = err.get("type") if isinstance(err.get("type"), str) else "api_error"
        api_message = err.get("message") if isinstance(err.get("message"), str) else "no error message"
        message = f"{error_type}: {api_message} (an error inside an HTTP {http_status} answer)"
        return classify_status(ERROR_STATUS.get(error_type, 500), redact(message, self._api_key), {},
                               provider=self.name, code=error_type)

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
        status = exc.status_code
        if status < 400:  # a stream's `event: error` arrives on the 200 that opened it
            status = ERROR_STATUS.get(error_type or "", 500)
            message = f"{message} (an error event inside the stream)"
        return classify_status(
            status, redact(message, self._api_key), exc.response.headers, provider=self.name, code=code
        )


def _usage(usage: Any) -> Usage:
    """The call's tokens; missing or malformed counts are 0 (the SDK does not validate them)."""
    return Usage(
        input_tokens=as_int(getattr(usage, "input_tokens", None)),
        output_tokens=as_int(getattr(usage, "output_tokens", None)),
        cache_read_tokens=as_int(getattr(usage, "cache_read_input_tokens", None)),
        cache_write_tokens=as_int(getattr(usage, "cache_creation_input_tokens", None)),
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
