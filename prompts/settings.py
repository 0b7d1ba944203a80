"""The values the prompt core needs, as frozen dataclasses.

cardloop/contracts/config.py reads config.toml and the environment and builds these; the prompt core
never reads a file of configuration or an environment variable itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cardloop.prompts.card import ContextKind
from cardloop.prompts.stages import Stage

BUDGET_SECTIONS: tuple[str, ...] = ("system", "agent", "history", "context")


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """Token budget of one assembled prompt, in calibrated tokens."""

    system: int = 1_000
    agent: int = 1_500
    history: int = 10_000
    context: int = 15_000
    total: int = 27_500

    def problems(self) -> list[str]:
        """Why this budget cannot work, one message per problem naming the field."""
        out = []
        for name in (*BUDGET_SECTIONS, "total"):
            if getattr(self, name) < 0:
                out.append(f"{name} ({getattr(self, name)}) must not be negative")
        for name in BUDGET_SECTIONS:
            if getattr(self, name) > self.total:
                out.append(f"{name} ({getattr(self, name):,}) is larger than total ({self.total:,})")
        return out


@dataclass(frozen=True, slots=True)
class HistorySettings:
    # Share of the history budget kept verbatim as the recent tail when folding.
    tail_fraction: float = 0.5
    # Share of the history budget for the deterministic pinned-facts block.
    pinned_fraction: float = 0.08
    # The first user request is kept verbatim unless it alone exceeds this share.
    first_request_max_fraction: float = 0.2
    # Below this many tokens a summary is not worth asking for: truncate instead.
    min_summary_tokens: int = 200
    # The fold's boundary moves in steps of this share of the tail budget (0: every turn).
    fold_step_fraction: float = 0.8


DEFAULT_PRIORITIES: Mapping[ContextKind, int] = {
    ContextKind.NOTES: 100,
    ContextKind.SOURCE_STATUS: 95,
    ContextKind.RESEARCH: 92,
    ContextKind.BUILD_LOG: 90,
    ContextKind.REVIEW_COMMENT: 88,
    ContextKind.POD_LOG: 85,
    ContextKind.SOURCE_FILE: 80,
    ContextKind.TEST_RESULT: 75,
    ContextKind.ADR: 50,
    ContextKind.LIBRARY_DOC: 40,
}

DEFAULT_KIND_STAGES: Mapping[ContextKind, tuple[Stage, ...]] = {
    ContextKind.BUILD_LOG: (Stage.ERROR_FIXING,),
    ContextKind.POD_LOG: (Stage.ERROR_FIXING,),
    ContextKind.REVIEW_COMMENT: (Stage.REVIEW, Stage.CODING),
}


@dataclass(frozen=True, slots=True)
class ContextSettings:
    priorities: Mapping[ContextKind, int] = field(default_factory=lambda: dict(DEFAULT_PRIORITIES))
    # Kinds listed here only go into the stages named; unlisted kinds go into every stage.
    kind_stages: Mapping[ContextKind, tuple[Stage, ...]] = field(
        default_factory=lambda: dict(DEFAULT_KIND_STAGES)
    )
    # No single item may take more than this; a longer one is excerpted.
    max_item_tokens: int = 6_000
    # An item that would be cut below this size is dropped instead of shown as a stub.
    min_item_tokens: int = 120
    # The card's title and body are always included, the body cut to this size.
    card_max_tokens: int = 2_000

    def allowed(self, kind: ContextKind, stage: Stage | None) -> bool:
        stages = self.kind_stages.get(kind)
        return stages is None or (stage is not None and stage in stages)


@dataclass(frozen=True, slots=True)
class PromptSource:
    """A piece of configured prompt text and where it came from (for `explain`)."""

    text: str
    source: str


@dataclass(frozen=True, slots=True)
class AssemblySettings:
    """Everything one assembly needs besides the card: budgets, layers, profile."""

    budget: TokenBudget = field(default_factory=TokenBudget)
    history: HistorySettings = field(default_factory=HistorySettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    profile: str = "default"
    provider: str = "anthropic"
    format: str = "anthropic"
    model: str = ""
    max_tokens: int = 4_096
    temperature: float | None = None
    max_iterations: int = 8
    # cl100k_base undercounts other tokenizers (Claude's): every count is multiplied by this.
    calibration: float = 1.0
    # The shortest prefix the model's provider caches: no cache breakpoint on a shorter one.
    min_cache_tokens: int = 1024
    profile_prompt: PromptSource | None = None
    provider_default: PromptSource = PromptSource(
        "You are a helpful assistant.", "provider default"
    )
    # Added to every message's count: role markers and framing in every provider format.
    message_overhead: int = 4
