"""What every LLM provider is and returns: the Provider protocol, a turn's Completion with its
Usage, and the events of a streamed turn. Failures are UpstreamErrors (cardloop.integrations.
upstream), classified the same way for every provider by errors.py."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cardloop.prompts.conversation import Conversation, ToolUse


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. input_tokens excludes cache reads and writes (Anthropic's meaning),
    so the three input fields add up to the whole prompt and each has its own price."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Completion:
    """One model turn. stop_reason uses Anthropic's words for all providers: end_turn,
    max_tokens, stop_sequence, refusal (others pass through lower-cased)."""

    text: str
    usage: Usage
    stop_reason: str | None
    model: str
    response_id: str | None
    # The tools the model asked to run (when the conversation offered tools); text holds only
    # the reply's own text.
    tool_calls: tuple[ToolUse, ...] = ()


@dataclass(frozen=True)
class StreamStart:
    """A streamed turn has begun: the provider accepted the request. `usage` holds the input side."""

    usage: Usage
    model: str
    response_id: str | None


@dataclass(frozen=True)
class TextDelta:
    """The next piece of a streamed turn's text, as the provider produced it."""

    text: str


# What StreamingProvider.stream yields: one StreamStart, TextDeltas, then the turn's Completion
# (its text is the deltas joined, its usage the whole call's); nothing follows the Completion.
StreamEvent = StreamStart | TextDelta | Completion


@runtime_checkable
class Provider(Protocol):
    name: str

    def complete(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Completion: ...


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream a turn. Failures before or during the stream raise the
    same classified UpstreamError as complete(), from the iterator's next()."""

    def stream(
        self, conversation: Conversation, *, model: str, max_tokens: int, temperature: float | None
    ) -> Iterator[StreamEvent]: ...


NO_USAGE = "the provider reported no usage: estimated from the text sent and received (cl100k_base)"


def with_usage(done: Completion, conversation: Conversation | None, count: Callable[[str], int]
               ) -> tuple[Completion, str | None]:
    """`done`, its usage estimated when the provider reported none (some OpenAI-compatible
    servers send no usage block): counted as nothing, such calls cost nothing in the ledger and
    passed every token and cost cap. (the completion, the ledger row's note or None)."""
    if done.usage != Usage() or conversation is None:
        return done, None
    sent = count(json.dumps(conversation.to_payload(), ensure_ascii=False))
    got = count(done.text) + sum(count(c.name + json.dumps(c.input, ensure_ascii=False)) for c in done.tool_calls)
    return dataclasses.replace(done, usage=Usage(input_tokens=sent, output_tokens=max(got, 1))), NO_USAGE
