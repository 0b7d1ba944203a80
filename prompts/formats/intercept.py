"""Parse an incoming request in any supported shape into a provider-neutral Conversation.

Shapes read:

- Anthropic Messages params: ``system`` as a string or a list of text blocks; messages with
  string or block-list content. tool_use / tool_result (and other non-text) blocks become
  readable text (``[tool_use NAME id=ID]`` + JSON input, ``[tool_result id=ID]`` + content),
  never dropped; images and documents become an ``[image omitted]``-style placeholder;
  thinking blocks are dropped (with a warning) because they are the model's scratch work,
  not conversation. ``cache_control`` on a block sets ``cache`` on its SystemBlock / Turn.
- OpenAI chat: ``system`` / ``developer`` messages anywhere become system blocks in order;
  content is a string or a list of parts; ``tool`` / ``function`` messages become user turns
  prefixed ``[tool result ID]``; assistant ``tool_calls`` become ``[tool_call NAME id=ID]`` text.
- Gemini: ``system_instruction`` or ``systemInstruction`` (one system block per text part),
  ``contents`` with role user / model; functionCall / functionResponse parts become text.
- Text: ChatML, Gemma markers (with or without a system turn), legacy ``Human:`` /
  ``Assistant:``; a ``{"prompt": "..."}`` body is read as text. A trailing generation prompt
  produces no empty turn; a trailing open assistant turn is a prefill turn.

Several text blocks or parts of one message are joined with a blank line.

Embedded transcripts: a system text that itself contains ChatML or Gemma markers, or lines
starting with both ``Human:`` and ``Assistant:``, is read as a transcript. Its system parts
and any text outside turns become plain system text (markers and labels stripped, see
``clean_system_text``); its user/assistant turns are KEPT as turns, inserted where that system
text stood (before the request's messages for a top-level ``system`` field, at the message's
position for an OpenAI system message), and a warning says so. This applies to system text
in every shape, so a system prompt that merely *quotes* such markers is rewritten too.

Fallback: a request that cannot be parsed (unknown dict shape, text without markers) is
treated as plain text: its text (for a dict, every string value in it) becomes one user turn,
detected_format is "chatml", and a warning is added and logged. ``intercept`` never raises on
dict or str input; the user's own text is never dropped.

Round-trip limits (render(conv, A) -> intercept gives back conv.normalized() except when):

- human: text containing ``\\n\\nHuman:`` or ``\\n\\nAssistant:`` splits into extra turns (this
  includes the joined system text, e.g. a block ending in a newline followed by one starting
  with ``\\nHuman:``); a system text starting with ``Human:`` / ``Assistant:`` reads as a turn;
  a whitespace-only system text is dropped. Reading hand-written text: once any blank-line
  delimiter is present, one-newline ``Human:`` lines are plain text, so in
  ``"Sys\\nHuman: hi\\n\\nAssistant:"`` the "hi" stays in the system text (kept, not dropped).
- chatml / gemma: text containing that format's own markers cuts the turn there.
- gemma with system_turn=False: the system text stays inside the first user turn.
- gemini: identical system blocks are sent once, so a duplicated block comes back once; the
  block structure comes back as one block (normalized() compares the joined text).
- text formats: a trailing blank assistant turn is the generation prompt and comes back as
  nothing; cache flags survive only anthropic -> anthropic.
- any format: a system text containing chat markers or ``Human:``/``Assistant:`` lines is an
  embedded transcript (above) and comes back cleaned and split.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from cardloop.prompts.conversation import Conversation, InterceptResult, Role, SystemBlock, Turn
from cardloop.prompts.formats.transcripts import (
    Segment,
    embedded_family,
    parse_text,
    scrub_markers,
    text_family,
)

logger = logging.getLogger(__name__)

# Block / part types whose payload is binary or a reference: kept as a placeholder.
_MEDIA_TYPES = frozenset(
    {"image", "image_url", "input_image", "document", "file", "input_file", "input_audio"}
)
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_OPENAI_MESSAGE_KEYS = ("tool_calls", "function_call", "tool_call_id")
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "document", "image"}
)
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "refusal", "file"})

# Bounds for walking arbitrary JSON: deep or cyclic input must not blow the stack.
_MAX_DEPTH = 64

# --------------------------------------------------------------------------- helpers


def _strings(value: Any) -> str:
    """Every string leaf of `value` (dict values, list items) in order, blank-line joined.

    Used wherever a shape is unknown, so that text in it is kept rather than dropped.
    Iterative with a depth bound and a cycle guard: arbitrary input must never raise.
    """
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if item:
                out.append(item)
            continue
        if depth >= _MAX_DEPTH or id(item) in seen:
            continue
        if isinstance(item, Mapping):
            seen.add(id(item))
            children = list(item.values())
        elif isinstance(item, list | tuple):
            seen.add(id(item))
            children = list(item)
        else:
            continue
        # Reversed onto the stack so the leaves come out in document order.
        stack.extend((child, depth + 1) for child in reversed(children))
    return "\n\n".join(out)


def _readable(value: Any) -> str:
    """A tool payload as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return _strings(value)


def _label(value: Any) -> str:
    """An id or name for a bracketed prefix; empty when absent or not a scalar."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    return ""


def _join(*pieces: str) -> str:
    return "\n\n".join(p for p in pieces if p)


# --------------------------------------------------------------------------- builder


class _Builder:
    """Collects system blocks, turns and warnings while a request is read."""

    def __init__(self) -> None:
        self.system: list[SystemBlock] = []
        self.turns: list[Turn] = []
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def turn(self, role: Role, text: str, cache: bool = False) -> None:
        self.turns.append(Turn(role, text, cache))

    def add_system(self, text: str, cache: bool = False) -> None:
        if not text:
            return
        family = embedded_family(text)
        if family is None:
            self.system.append(SystemBlock(text, cache))
            return
        segments, warnings = parse_text(text, family, embedded=True)
        self.warnings.extend(warnings)
        added = 0
        kept_turns = 0
        for kind, body in segments:
            if kind == "system":
                cleaned = scrub_markers(body)
                if cleaned:
                    self.system.append(SystemBlock(cleaned))
                    added += 1
            else:
                self.turn("assistant" if kind == "assistant" else "user", body)
                kept_turns += 1
        if cache and added:
            # The breakpoint belonged to the end of this text: put it on its last block.
            self.system[-1] = SystemBlock(self.system[-1].text, True)
        note = f"; {kept_turns} embedded turn(s) kept as turns" if kept_turns else ""
        self.warn(f"system text contained {family} transcript markers; cleaned{note}")

    def add_segments(self, segments: list[Segment]) -> None:
        for kind, body in segments:
            if kind == "system":
                self.add_system(body)
            else:
                self.turn("assistant" if kind == "assistant" else "user", body)

    def result(self, detected: str) -> InterceptResult:
        for message in self.warnings:
            logger.warning("intercept (%s): %s", detected, message)
        return InterceptResult(
            Conversation(tuple(self.system), tuple(self.turns)), detected, list(self.warnings)
        )


# --------------------------------------------------------------------------- dict formats


def _content_text(content: Any, b: _Builder) -> tuple[str, bool]:
    """Message content (string, block list, single block) as text, and its cache flag."""
    if content is None:
        return "", False
    if isinstance(content, str):
        return content, False
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return (_strings(content) or _label(content)), False
    pieces: list[str] = []
    cache = False
    for part in content:
        if isinstance(part, Mapping):
            cache = cache or bool(part.get("cache_control"))
            piece = _block_text(part, b)
        else:
            piece = _strings(part) or _label(part)
        if piece:
            pieces.append(piece)
    return _join(*pieces), cache


def _block_text(part: Mapping[str, Any], b: _Builder) -> str:
    """One Anthropic block or OpenAI part as readable text ("" for a dropped thinking block)."""
    kind = part.get("type")
    kind = kind if isinstance(kind, str) else ""
    text = part.get("text")
    if kind in _TEXT_TYPES | {""} and isinstance(text, str):
        return text
    if kind in ("tool_use", "server_tool_use"):
        head = f"[tool_use {_label(part.get('name'))} id={_label(part.get('id'))}]"
        return f"{head}\n{_readable(part.get('input'))}"
    if kind == "tool_result" or kind.endswith("_tool_result"):
        inner, _ = _content_text(part.get("content"), b)
        error = " error" if part.get("is_error") else ""
        return f"[{kind}{error} id={_label(part.get('tool_use_id'))}]\n{inner}"
    if kind in _THINKING_TYPES:
        b.warn(f"dropped a {kind} block (model scratch work, not conversation)")
        return ""
    if kind in _MEDIA_TYPES:
        b.warn(f"{kind} content cannot be carried as text; left a placeholder")
        return f"[{kind} omitted]"
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    rest = _strings({k: v for k, v in part.items() if k not in ("type", "cache_control")})
    b.warn(f"unknown content block type {kind!r} kept as text")
    return _join(f"[{kind or 'block'}]", rest)


def _tool_calls_text(message: Mapping[str, Any]) -> list[str]:
    """OpenAI assistant tool_calls / function_call as readable text."""
    calls: list[Any] = []
    if isinstance(message.get("tool_calls"), list):
        calls.extend(message["tool_calls"])
    if isinstance(message.get("function_call"), Mapping):
        calls.append({"function": message["function_call"]})
    out: list[str] = []
    for call in calls:
        if not isinstance(call, Mapping):
            if text := _strings(call):
                out.append(text)
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        head = f"[tool_call {_label(fn.get('name'))} id={_label(call.get('id'))}]"
        out.append(f"{head}\n{_readable(fn.get('arguments'))}")
    return out


def _read_message(message: Any, index: int, b: _Builder) -> None:
    if not isinstance(message, Mapping):
        text = message if isinstance(message, str) else _strings(message)
        if text:
            b.warn(f"message {index} is not an object; its text kept as a user turn")
            b.turn("user", text)
        return
    raw_role = message.get("role")
    role = raw_role.strip().lower() if isinstance(raw_role, str) else ""
    text, cache = _content_text(message.get("content"), b)
    if role in ("system", "developer"):
        b.add_system(text, cache)
    elif role in ("tool", "function", "ipython"):
        ident = _label(message.get("tool_call_id")) or _label(message.get("name"))
        prefix = f"[{role} result {ident}]" if ident else f"[{role} result]"
        b.turn("user", f"{prefix}\n{text}", cache)
    elif role in ("assistant", "model"):
        b.turn("assistant", _join(text, *_tool_calls_text(message)), cache)
    else:
        if role != "user":
            b.warn(f"message {index} has role {raw_role!r}; kept as a user turn")
        b.turn("user", text, cache)


def _read_anthropic_system(value: Any, b: _Builder) -> None:
    if value is None:
        return
    if isinstance(value, str):
        b.add_system(value)
        return
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, list):
        b.add_system(_label(value))
        return
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("text"), str):
            b.add_system(item["text"], bool(item.get("cache_control")))
        else:
            b.add_system(item if isinstance(item, str) else _strings(item))


def _messages_flavour(request: Mapping[str, Any], messages: list[Any]) -> str:
    """Anthropic or OpenAI for a {"messages": [...]} body.

    Both parse the same way; this only picks the name. OpenAI-only roles/keys win (the
    Anthropic API rejects them), then a top-level ``system`` or Anthropic-only blocks, then
    block-list content (what to_anthropic writes) versus plain strings (what to_openai writes).
    """
    dicts = [m for m in messages if isinstance(m, Mapping)]
    roles = {m.get("role") for m in dicts if isinstance(m.get("role"), str)}
    if roles & _OPENAI_ROLES or any(k in m for m in dicts for k in _OPENAI_MESSAGE_KEYS):
        return "openai"
    if "system" in request:
        return "anthropic"
    contents = [m.get("content") for m in dicts]
    types = {
        part.get("type")
        for c in contents
        if isinstance(c, list)
        for part in c
        if isinstance(part, Mapping) and isinstance(part.get("type"), str)
    }
    if types & _ANTHROPIC_BLOCKS:
        return "anthropic"
    if types & _OPENAI_PARTS:
        return "openai"
    return "anthropic" if any(isinstance(c, list) for c in contents) else "openai"


def _gemini_part(part: Any, b: _Builder) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return _strings(part) or _label(part)
    if isinstance(part.get("text"), str):
        if part.get("thought") is True:
            b.warn("dropped a Gemini thought part (model scratch work, not conversation)")
            return ""
        return str(part["text"])
    call = part.get("functionCall", part.get("function_call"))
    if isinstance(call, Mapping):
        return f"[function_call {_label(call.get('name'))}]\n{_readable(call.get('args'))}"
    response = part.get("functionResponse", part.get("function_response"))
    if isinstance(response, Mapping):
        name = _label(response.get("name"))
        return f"[function_response {name}]\n{_readable(response.get('response'))}"
    for key in ("inlineData", "inline_data", "fileData", "file_data"):
        if key in part:
            b.warn(f"Gemini {key} part cannot be carried as text; left a placeholder")
            return f"[{key} omitted]"
    b.warn("unknown Gemini part kept as text")
    return _strings(part)


def _gemini_parts(value: Any, b: _Builder) -> list[str]:
    if isinstance(value, Mapping) and "parts" in value:
        value = value["parts"]
    if not isinstance(value, list):
        value = [value]
    return [t for t in (_gemini_part(p, b) for p in value) if t]


def _read_gemini(request: Mapping[str, Any], b: _Builder) -> None:
    system = request.get("system_instruction", request.get("systemInstruction"))
    if system is not None:
        # One system block per part: Gemini's own joining (and system_text) use a blank line.
        for text in _gemini_parts(system, b):
            b.add_system(text)
    contents = request.get("contents")
    if contents is None:
        return
    if isinstance(contents, str | Mapping):
        contents = [contents]
    if not isinstance(contents, list):
        contents = [_strings(contents)]
    for index, item in enumerate(contents):
        if not isinstance(item, Mapping):
            text = _join(*_gemini_parts(item, b))
            if text:
                b.turn("user", text)
            continue
        raw_role = item.get("role")
        role = raw_role.lower() if isinstance(raw_role, str) else "user"
        text = _join(*_gemini_parts(item.get("parts"), b))
        if role in ("model", "assistant"):
            b.turn("assistant", text)
        elif role in ("function", "tool"):
            b.turn("user", f"[{role} result]\n{text}")
        elif role == "system":
            b.warn(f"contents[{index}] has role 'system'; read as system text")
            b.add_system(text)
        else:
            if role != "user":
                b.warn(f"contents[{index}] has role {raw_role!r}; kept as a user turn")
            b.turn("user", text)


# --------------------------------------------------------------------------- entry points


def _detect(request: Any) -> str | None:
    """The format of `request`, or None when it is not recognised."""
    if isinstance(request, str):
        return text_family(request)
    if isinstance(request, list):
        return _messages_flavour({}, request)
    if not isinstance(request, Mapping):
        return None
    if any(k in request for k in ("contents", "system_instruction", "systemInstruction")):
        return "gemini"
    if isinstance(request.get("messages"), list):
        return _messages_flavour(request, request["messages"])
    if isinstance(request.get("prompt"), str):
        return text_family(request["prompt"])
    return None


def detect_format(request: dict[str, Any] | str) -> str:
    """The format name (one of FORMATS) of an incoming request.

    Anything unrecognised is reported as "chatml", the plain-text fallback ``intercept`` uses
    for it (``intercept`` also adds a warning then). Never raises.
    """
    try:
        return _detect(request) or "chatml"
    except Exception:  # a detector must not fail the request it is inspecting
        return "chatml"


def _fallback(request: Any, b: _Builder, why: str) -> InterceptResult:
    text = request if isinstance(request, str) else _strings(request)
    b.warn(f"{why}; treated as plain text, kept as one user turn")
    if text:
        b.turn("user", text)
    return b.result("chatml")


def _intercept(request: Any) -> InterceptResult:
    b = _Builder()
    detected = _detect(request)
    if isinstance(request, list):
        request = {"messages": request}
    if detected is None:
        what = "text has no chat markers" if isinstance(request, str) else "unknown request shape"
        if isinstance(request, Mapping) and isinstance(request.get("prompt"), str):
            return _fallback(request["prompt"], b, "prompt text has no chat markers")
        return _fallback(request, b, what)
    if detected in ("chatml", "gemma", "human"):
        # A text prompt, bare or as the "prompt" of a completions body.
        text = request if isinstance(request, str) else str(request["prompt"])
        segments, warnings = parse_text(text, detected, embedded=False)
        b.warnings.extend(warnings)
        b.add_segments(segments)
        return b.result(detected)
    if detected == "gemini":
        _read_gemini(request, b)
        return b.result(detected)
    _read_anthropic_system(request.get("system"), b)
    for index, message in enumerate(request["messages"]):
        _read_message(message, index, b)
    return b.result(detected)


def intercept(request: dict[str, Any] | str) -> InterceptResult:
    """Parse an incoming request of any supported shape into a Conversation.

    Never raises on dict or str input: an unexpected failure falls back to plain text with a
    warning, like an unrecognised shape.
    """
    try:
        return _intercept(request)
    except Exception as exc:  # the last line of defence for "never raise"
        return _fallback(request, _Builder(), f"could not parse request ({type(exc).__name__})")
