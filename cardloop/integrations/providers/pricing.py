"""What a call cost. Prices come from config (the caller passes them): none are hard-coded
here, because they change more often than this code."""

from __future__ import annotations

from dataclasses import dataclass

from cardloop.integrations.providers.base import Usage


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens. Cache prices default to 0: set them from the provider's
    price list (Anthropic: read 0.1x input, 5-minute write 1.25x; OpenAI/Gemini: cached input)."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float = 0
    cache_write_per_mtok: float = 0


def cost_usd(usage: Usage, price: Price | None) -> float:
    """Cost of `usage` at `price`; 0.0 when the model has no price configured."""
    if price is None:
        return 0.0
    return (
        usage.input_tokens * price.input_per_mtok
        + usage.output_tokens * price.output_per_mtok
        + usage.cache_read_tokens * price.cache_read_per_mtok
        + usage.cache_write_tokens * price.cache_write_per_mtok
    ) / 1_000_000
