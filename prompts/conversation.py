"""A provider-neutral conversation: the shape every provider format renders from and
every intercepted request is parsed into.

System text is a list of blocks (the core/behaviour block, the agent block) so formats
that keep several system parts (Anthropic blocks, OpenAI system messages) can, and
formats with one system slot (Gemini) join them.

Tool use is structural: a conversation offers `tools` (name, description, JSON Schema), an
assistant turn may carry `tool_calls`, and a user turn may carry `tool_results` answering
them (with or without text of its own). Each provider format renders them natively (Anthropic
tool_use / tool_result blocks, OpenAI tool_calls and `tool` messages, Gemini functionCall /
functionResponse parts); the text formats write them as tagged text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class SystemBlock:
    text: str
    # True on the last block of a stable prefix: Anthropic gets a cache_control breakpoint here.
    cache: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: what providers call a tool or function declaration."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolUse:
    """The model's request to run a tool (an assistant turn's tool call)."""

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's answer to the call `call_id` (in a user turn)."""

    call_id: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Turn:
    role: Role
    text: str
    cache: bool = False
    tool_calls: tuple[ToolUse, ...] = ()      # assistant turns only
    tool_results: tuple[ToolOutput, ...] = ()  # user turns only

    def counted_text(self) -> str:
        """Everything in the turn the model reads, as text: for token counting."""
        if not self.tool_calls and not self.tool_results:
            return self.text
        parts = [self.text]
        parts += [f"{c.name} {c.id} {json.dumps(c.input, ensure_ascii=False, sort_keys=True)}"
                  for c in self.tool_calls]
        parts += [f"{r.call_id} {r.text}" for r in self.tool_results]
        return "\n".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Conversation:
    system: tuple[SystemBlock, ...] = ()
    turns: tuple[Turn, ...] = ()
    tools: tuple[ToolSpec, ...] = ()

    @property
    def system_text(self) -> str:
        return "\n\n".join(b.text for b in self.system if b.text)

    def counted_text(self) -> str:
        """Everything the model reads, as text: for counting a prompt's tokens before the call
        (the spend limits' reservation), not for sending."""
        parts = [self.system_text, *(t.counted_text() for t in self.turns)]
        parts += [f"{s.name} {s.description} {json.dumps(dict(s.input_schema), sort_keys=True)}" for s in self.tools]
        return "\n".join(p for p in parts if p)

    def to_payload(self) -> dict[str, Any]:
        # Tool keys only when used: a conversation without tools keeps its old payload.
        turns = []
        for t in self.turns:
            turn: dict[str, Any] = {"role": t.role, "text": t.text, "cache": t.cache}
            if t.tool_calls:
                turn["tool_calls"] = [{"id": c.id, "name": c.name, "input": dict(c.input)} for c in t.tool_calls]
            if t.tool_results:
                turn["tool_results"] = [{"call_id": r.call_id, "text": r.text, "is_error": r.is_error}
                                        for r in t.tool_results]
            turns.append(turn)
        payload: dict[str, Any] = {"system": [{"text": b.text, "cache": b.cache} for b in self.system],
                                   "turns": turns}
        if self.tools:
            payload["tools"] = [{"name": s.name, "description": s.description, "input_schema": dict(s.input_schema)}
                                for s in self.tools]
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Conversation:
        return cls(
            system=tuple(SystemBlock(b["text"], b["cache"]) for b in payload["system"]),
            turns=tuple(
                Turn(t["role"], t["text"], t["cache"],
                     tuple(ToolUse(c["id"], c["name"], c["input"]) for c in t.get("tool_calls", ())),
                     tuple(ToolOutput(r["call_id"], r["text"], r.get("is_error", False))
                           for r in t.get("tool_results", ())))
                for t in payload["turns"]),
            tools=tuple(ToolSpec(s["name"], s["description"], s["input_schema"]) for s in payload.get("tools", ())),
        )

    def normalized(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Roles and text only: what a round trip through any format must preserve."""
        return self.system_text, tuple((t.role, t.text) for t in self.turns)


@dataclass(slots=True)
class InterceptResult:
    """A request parsed into a Conversation, with what was detected and any warnings."""

    conversation: Conversation
    detected_format: str
    warnings: list[str] = field(default_factory=list)
