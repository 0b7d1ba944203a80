"""LLM providers behind one protocol: render a Conversation, make one call, return a
Completion with usage, or raise a classified UpstreamError (errors.py).

    provider = build_provider("anthropic", api_key=key, base_url=None, timeout=600.0)
    completion = provider.complete(conversation, model="claude-sonnet-4-6", max_tokens=8192, temperature=0.2)
"""

from __future__ import annotations

from typing import Any

from cardloop.integrations.providers.base import (
    Completion,
    Provider,
    StreamEvent,
    StreamingProvider,
    StreamStart,
    TextDelta,
    Usage,
)
from cardloop.integrations.providers.errors import classify_status, retry_after_from
from cardloop.integrations.providers.pricing import Price, cost_usd
from cardloop.integrations.providers.registry import PROVIDERS, ProviderEntry, build_provider

__all__ = [
    "PROVIDERS",
    "AnthropicProvider",
    "Completion",
    "GeminiProvider",
    "OpenAICompatProvider",
    "Price",
    "Provider",
    "ProviderEntry",
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


# The clients load their libraries (the anthropic SDK takes a second): imported when first named.
_CLIENTS = {"AnthropicProvider": "anthropic", "GeminiProvider": "gemini", "OpenAICompatProvider": "openai_compat"}


def __getattr__(name: str) -> Any:
    if name in _CLIENTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_CLIENTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
