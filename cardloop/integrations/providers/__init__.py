"""LLM providers behind one protocol: render a Conversation, make one call, return a
Completion with usage, or raise a classified ProviderError (see base.py for the tree).

    provider = build_provider("anthropic", api_key=key, base_url=None, timeout=600.0)
    completion = provider.complete(conversation, model="claude-sonnet-4-6", max_tokens=8192, temperature=0.2)
"""

from __future__ import annotations

from cardloop.integrations.providers.anthropic import AnthropicProvider
from cardloop.integrations.providers.base import (
    KINDS,
    MAX_RETRY_AFTER,
    Completion,
    Provider,
    ProviderError,
    StreamEvent,
    StreamingProvider,
    StreamStart,
    TextDelta,
    Usage,
    classify_status,
    missing_key,
    retry_after_from,
)
from cardloop.integrations.providers.gemini import GeminiProvider
from cardloop.integrations.providers.openai_compat import OpenAICompatProvider
from cardloop.integrations.providers.pricing import Price, cost_usd

PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "gemini")

__all__ = [
    "KINDS",
    "MAX_RETRY_AFTER",
    "PROVIDERS",
    "AnthropicProvider",
    "Completion",
    "GeminiProvider",
    "OpenAICompatProvider",
    "Price",
    "Provider",
    "ProviderError",
    "StreamEvent",
    "StreamStart",
    "StreamingProvider",
    "TextDelta",
    "Usage",
    "build_provider",
    "classify_status",
    "cost_usd",
    "retry_after_from",
]


def build_provider(provider: str, *, api_key: str | None, base_url: str | None, timeout: float = 600.0) -> Provider:
    """The provider named in a profile. An empty base_url means the provider's default endpoint
    (config.toml writes `base_url = ""`). OpenAI-compatible servers at a configured base_url may
    run without a key (Ollama, vLLM); OpenAI itself, Anthropic and Gemini need one."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; expected one of: {', '.join(PROVIDERS)}")
    base_url = base_url or None
    api_key = api_key or None
    if provider == "anthropic":
        if api_key is None:
            raise missing_key(provider)
        return AnthropicProvider(api_key=api_key, base_url=base_url, timeout=timeout)
    if provider == "gemini":
        if api_key is None:
            raise missing_key(provider)
        return GeminiProvider(api_key=api_key, base_url=base_url, timeout=timeout)
    if api_key is None and base_url is None:
        raise missing_key(provider)
    return OpenAICompatProvider(base_url=base_url, api_key=api_key, timeout=timeout)
