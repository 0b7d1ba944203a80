"""Before the first stage: can every model the stages use be reached, and does it take our key?
One request per distinct endpoint (integrations/providers/preflight.py); a failure is one line
that says what to fix, and nothing is started. `cardloop demo` stops on it (exit 1); `cardloop
dev` says it and serves anyway (the network or the key may come back while it runs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cardloop.contracts.config import Config
from cardloop.contracts.errors import CardloopError
from cardloop.integrations.providers.preflight import (
    ANTHROPIC_BASE_URL,
    GEMINI_BASE_URL,
    OPENAI_BASE_URL,
    check_endpoint,
)
from cardloop.integrations.upstream import UpstreamError

_DEFAULT_URLS = {"anthropic": ANTHROPIC_BASE_URL, "openai": OPENAI_BASE_URL, "gemini": GEMINI_BASE_URL}


class ModelUnusable(CardloopError):
    exit_code = 1


def used_profiles(config: Config) -> list[str]:
    """The profiles the stages and the summarizer run, in stage order."""
    names = [config.stage(s).profile for s in config.stages_enum()] + [config.summarizer.profile]
    return list(dict.fromkeys(names))


def _hint(err: UpstreamError, key_env: str, profile: str) -> str:
    if err.kind == "auth":
        return f"the key was refused: check {key_env}" if key_env else "the key was refused"
    if err.kind in ("connection", "timeout"):
        return f"no network, or a wrong base_url in [profiles.{profile}]"
    if err.kind == "not_found":
        return f"[profiles.{profile}] base_url does not point at the provider's API"
    if err.kind == "spend_limit":
        return "the account's spend limit or credit is used up"
    return "see the provider's message"


def check_models(config: Config, base_urls: Mapping[str, str] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
    """ModelUnusable naming the first endpoint that fails, or return when all answered."""
    base_urls = base_urls or {}
    seen: dict[tuple[str, str | None, str | None], list[str]] = {}
    for name in used_profiles(config):
        prof = config.profiles[name]
        key = config.api_key(name)
        url = base_urls.get(name) or prof.base_url or None
        seen.setdefault((prof.provider, url, key.reveal() if key else None), []).append(name)
    for (provider, url, key), profiles in seen.items():
        shown = url or _DEFAULT_URLS.get(provider, provider)
        if say:
            say(f"checking the model: {provider} at {shown} ({_profiles(profiles)}) …")
        try:
            check_endpoint(provider, api_key=key, base_url=url)
        except UpstreamError as err:
            key_env = config.profiles[profiles[0]].api_key_env
            raise ModelUnusable(f"the model cannot be used: {provider} at {shown} ({_profiles(profiles)}): "
                                f"{err.message} ({_hint(err, key_env, profiles[0])})") from None


def _profiles(names: list[str]) -> str:
    return ("profile " if len(names) == 1 else "profiles ") + ", ".join(names)


__all__ = ["ModelUnusable", "check_models", "used_profiles"]
