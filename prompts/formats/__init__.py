"""Provider request formats: render a Conversation for a provider, or read one back.

``render`` turns a neutral ``Conversation`` into Anthropic / OpenAI / Gemini request bodies or
ChatML / Gemma / legacy Human-Assistant prompt text; ``intercept`` parses any of those shapes
(and a few looser ones) back into a ``Conversation``.
"""

from cardloop.prompts.formats.intercept import detect_format, intercept
from cardloop.prompts.formats.render import (
    ALIASES,
    FORMATS,
    MAX_CACHE_BREAKPOINTS,
    render,
    resolve_format,
    to_anthropic,
    to_chatml,
    to_gemini,
    to_gemma,
    to_human_assistant,
    to_openai,
)
from cardloop.prompts.formats.transcripts import clean_system_text

__all__ = [
    "ALIASES",
    "FORMATS",
    "MAX_CACHE_BREAKPOINTS",
    "clean_system_text",
    "detect_format",
    "intercept",
    "render",
    "resolve_format",
    "to_anthropic",
    "to_chatml",
    "to_gemini",
    "to_gemma",
    "to_human_assistant",
    "to_openai",
]
