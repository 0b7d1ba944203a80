"""A provider-neutral conversation: the shape every provider format renders from and
every intercepted request is parsed into.

System text is a list of blocks (the core/behaviour block, the agent block) so formats
that keep several system parts (Anthropic blocks, OpenAI system messages) can, and
formats with one system slot (Gemini) join them.
"""

from __future__ import annotations

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
class Turn:
    role: Role
    text: str
    cache: bool = False


@dataclass(frozen=True, slots=True)
class Conversation:
    system: tuple[SystemBlock, ...] = ()
    turns: tuple[Turn, ...] = ()

    @property
    def system_text(self) -> str:
        return "\n\n".join(b.text for b in self.system if b.text)

    def to_payload(self) -> dict[str, Any]:
        return {"system": [{"text": b.text, "cache": b.cache} for b in self.system],
                "turns": [{"role": t.role, "text": t.text, "cache": t.cache} for t in self.turns]}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Conversation:
        return cls(system=tuple(SystemBlock(b["text"], b["cache"]) for b in payload["system"]),
                   turns=tuple(Turn(t["role"], t["text"], t["cache"]) for t in payload["turns"]))

    def normalized(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Roles and text only: what a round trip through any format must preserve."""
        return self.system_text, tuple((t.role, t.text) for t in self.turns)


@dataclass(slots=True)
class InterceptResult:
    """A request parsed into a Conversation, with what was detected and any warnings."""

    conversation: Conversation
    detected_format: str
    warnings: list[str] = field(default_factory=list)
