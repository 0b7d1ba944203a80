"""The provider family: one entry per provider, naming it and saying how it is built from a
profile's key, base URL and timeout (its client library imported on first use). A new provider
is one module plus one line here; a `[providers.<name>]` table in config.toml that names none
of these fails at start-up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cardloop.integrations.lazy import Lazy
from cardloop.integrations.providers.base import Provider
from cardloop.integrations.providers.errors import missing_key


@dataclass(frozen=True)
class ProviderEntry:
    name: str
    label: str
    # build(api_key=..., base_url=..., timeout=...) -> the client; base_url None: the provider's endpoint.
    build: Callable[..., Provider]
    # OpenAI-compatible servers at a configured base URL may run without a key (Ollama, vLLM).
    keyless_at_base_url: bool = False


_PKG = "cardloop.integrations.providers"

PROVIDERS: dict[str, ProviderEntry] = {e.name: e for e in (
    ProviderEntry("anthropic", "Anthropic Messages API (the anthropic SDK)",
                  Lazy(f"{_PKG}.anthropic", "AnthropicProvider")),
    ProviderEntry("openai", "OpenAI chat completions and compatible servers",
                  Lazy(f"{_PKG}.openai_compat", "OpenAICompatProvider"), keyless_at_base_url=True),
    ProviderEntry("gemini", "Gemini generateContent", Lazy(f"{_PKG}.gemini", "GeminiProvider")),
)}


def build_provider(provider: str, *, api_key: str | None, base_url: str | None, timeout: float = 600.0) -> Provider:
    """The provider named in a profile. An empty base_url means the provider's default endpoint
    (config.toml writes `base_url = ""`); a provider that needs a key and has none is an auth
    UpstreamError, so the stage fails at once with what to set."""
    entry = PROVIDERS.get(provider)
    if entry is None:
        raise ValueError(f"unknown provider {provider!r}; expected one of: {', '.join(PROVIDERS)}")
    base_url = base_url or None
    api_key = api_key or None
    if api_key is None and not (entry.keyless_at_base_url and base_url is not None):
        raise missing_key(provider)
    return entry.build(api_key=api_key, base_url=base_url, timeout=timeout)
