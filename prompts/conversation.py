"""A provider-neutral conversation: the shape every provider format renders from and
every intercepted request is parsed into.

System text is a list of blocks (the core/behaviour block, the agent block) so formats
that keep several system parts (Anthropic blocks, OpenAI system messages) can, and
formats with one system slot (Gemini) join them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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

    def normalized(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Roles and text only: what a round trip through any format must preserve."""
        return self.system_text, tuple((t.role, t.text) for t in self.turns)


@dataclass(slots=True)
class InterceptResult:
    """A request parsed into a Conversation, with what was detected and any warnings."""

    conversation: Conversation
    detected_format: str
    warnings: list[str] = field(default_factory=list)
