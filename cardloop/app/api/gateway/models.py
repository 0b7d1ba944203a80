"""The values a gateway call passes between its parts: the validated request, the prepared call,
the answer, a live provider stream, and the error every part raises in the caller's shape."""

from __future__ import annotations

import logging
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cardloop.integrations.providers import Completion, StreamStart
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.conversation import Conversation

# One logger for the whole gateway, under the name operators already filter on.
logger = logging.getLogger("cardloop.app.api.gateway")

Protocol = Literal["openai", "anthropic"]

STAGE = "gateway"


class GatewayError(Exception):
    """A request the gateway answers with an error in the caller's shape."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.retry_after = retry_after


def invalid(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(400, message, code="invalid_request", param=param)


@dataclass(frozen=True)
class GatewayCall:
    """A validated request, whatever its protocol."""

    protocol: Protocol
    body: Mapping[str, Any]  # what intercept reads: "messages" (and Anthropic "system") only
    model_label: str | None
    max_tokens: int | None
    temperature: float | None
    stream: bool
    include_usage: bool  # OpenAI stream_options.include_usage
    ignored: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    completion: Completion
    call_id: str
    model: str  # what the response says: the caller's label, else the profile's model
    redactions: int
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Prepared:
    """A call ready for the provider: the layered, redacted conversation and the profile's limits."""

    conversation: Conversation
    redactions: int
    warnings: list[str]
    profile: str
    max_tokens: int
    temperature: float | None


class StreamLedger(typing.Protocol):  # typing's: `Protocol` here names the caller's wire protocol
    """A live stream's ledger row (provider.StreamLedger), settled exactly once however it ends."""

    def delta(self, text: str) -> None: ...  # text forwarded to the caller (the output so far)

    def finish(self, done: Completion) -> None: ...  # the final event: its usage

    def fail(self, err: UpstreamError) -> GatewayError: ...  # the provider failed mid-stream

    def close(self) -> None: ...  # any other end: the caller hung up, or nobody read on


@dataclass
class LiveStream:
    """A provider stream that has started (its StreamStart is in hand), to be forwarded."""

    events: Iterator[Any]  # the rest of the provider's StreamEvents
    start: StreamStart
    ledger: StreamLedger
    call_id: str
    model: str  # the caller's label, else the profile's model
