"""Render a provider-neutral Conversation into one provider's request shape.

Dict formats (anthropic, openai, gemini) return the JSON body of the provider's chat call;
text formats (chatml, gemma, human) return the prompt string for a raw completion call.

Decisions callers must know:

- A trailing assistant turn is a *prefill*, as in the Anthropic Messages API: the text formats
  leave it open (no end marker, no new generation prompt) so the model continues it, like
  Hugging Face's ``continue_final_message``. Otherwise the text formats end with the
  generation prompt. A trailing assistant turn whose text is blank is just the generation
  prompt, so it does not survive a trip through a text format.
- Text formats ignore ``model``, ``max_tokens`` and ``temperature``: a prompt string has no
  place for them. Gemini ignores ``model`` because Gemini takes it in the URL path.
- Anthropic gets at most four cache_control breakpoints (the API's limit). When more blocks
  are flagged, the FIRST four in prefix order (system blocks, then turns) are kept: the early
  prefix is the one shared by most requests, so it is the one worth caching. A flag on an empty
  system block is ignored (empty blocks are not sent).
- Empty system blocks are skipped by every format, as ``Conversation.system_text`` does.
- Text is never trimmed or rewritten; what a format cannot express is listed in
  ``cardloop.prompts.formats.intercept`` (round-trip limits).
- Tools: the dict formats send ``conv.tools`` as the provider's tool definitions and render
  tool calls and results natively (see each function); consecutive user turns that hold only
  tool results become one Anthropic message (the API wants every result of an assistant turn
  in the next message). The text formats write calls and results as tagged text
  (``[tool_use NAME id=ID]`` + JSON input, ``[tool_result id=ID]`` + text), the shapes
  ``intercept`` reads back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from cardloop.prompts.conversation import Conversation, SystemBlock, ToolSpec, Turn

logger = logging.getLogger(__name__)

FORMATS: tuple[str, ...] = ("anthropic", "openai", "gemini", "chatml", "gemma", "human")

# Names people use for a provider or server that speaks one of FORMATS.
ALIASES: dict[str, str] = {
    "qwen": "chatml",
    "deepseek": "chatml",
    "vllm": "openai",
    "ollama": "openai",
    "litellm": "openai",
    "claude": "anthropic",
}

# The Anthropic API rejects a request with more than four cache_control blocks.
MAX_CACHE_BREAKPOINTS = 4

CHATML_START = "<|im_start|>"
CHATML_END = "<|im_end|>"
GEMMA_START = "<start_of_turn>"
GEMMA_END = "<end_of_turn>"
HUMAN_LABEL = "Human:"
ASSISTANT_LABEL = "Assistant:"


def resolve_format(name: str) -> str:
    """Return the canonical format for `name` (a format or an alias, any case).

    Raises ValueError listing the valid names for anything else.
    """
    key = name.strip().lower() if isinstance(name, str) else ""
    if key in FORMATS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    valid = ", ".join(FORMATS)
    aliases = ", ".join(f"{a} ({f})" for a, f in ALIASES.items())
    raise ValueError(
        f"unknown prompt format {name!r}; expected one of: {valid}; aliases: {aliases}"
    )


def render(
    conv: Conversation,
    fmt: str,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> dict[str, Any] | str:
    """Render `conv` in format `fmt` (a name from FORMATS or ALIASES)."""
    name = resolve_format(fmt)
    if name == "anthropic":
        return to_anthropic(conv, model=model, max_tokens=max_tokens, temperature=temperature)
    if name == "openai":
        return to_openai(conv, model=model, max_tokens=max_tokens, temperature=temperature)
    if name == "gemini":
        return to_gemini(conv, max_tokens=max_tokens, temperature=temperature)
    if name == "chatml":
        return to_chatml(_as_text(conv))
    if name == "gemma":
        return to_gemma(_as_text(conv))
    return to_human_assistant(_as_text(conv))


def _sampling(
    model: str | None, max_tokens: int | None, temperature: float | None
) -> dict[str, Any]:
    # Keys are omitted when None so the provider's own defaults apply.
    params: dict[str, Any] = {}
    if model is not None:
        params["model"] = model
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if temperature is not None:
        params["temperature"] = temperature
    return params


def to_anthropic(
    conv: Conversation,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """Anthropic Messages API params.

    System blocks become text blocks of ``system`` (no key when there is no system text);
    each turn becomes a message with one text block. ``cache_control: ephemeral`` goes on
    flagged blocks, at most MAX_CACHE_BREAKPOINTS, the first ones in prefix order.
    Note the API itself rejects empty text blocks and needs ``max_tokens``: both are the
    caller's business, this function does not invent values.
    """
    params = _sampling(model, max_tokens, temperature)
    left = MAX_CACHE_BREAKPOINTS
    dropped = 0

    def block(text: str, cache: bool) -> dict[str, Any]:
        nonlocal left, dropped
        entry: dict[str, Any] = {"type": "text", "text": text}
        if cache:
            if left > 0:
                # A fresh dict each time: callers may mutate the result.
                entry["cache_control"] = {"type": "ephemeral"}
                left -= 1
            else:
                dropped += 1
        return entry

    system = [block(b.text, b.cache) for b in conv.system if b.text]
    if system:
        params["system"] = system
    if conv.tools:
        params["tools"] = [{"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
                           for t in conv.tools]
    messages: list[dict[str, Any]] = []
    for t in conv.turns:
        if not t.tool_calls and not t.tool_results:
            messages.append({"role": t.role, "content": [block(t.text, t.cache)]})
            continue
        content: list[dict[str, Any]] = []
        # tool_result blocks come first in a user message (the API's rule), tool_use after text.
        for r in t.tool_results:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.call_id, "content": r.text}
            if r.is_error:
                result["is_error"] = True
            content.append(result)
        if t.text:
            content.append({"type": "text", "text": t.text})
        content.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.input)} for c in t.tool_calls)
        if t.cache and content:
            marker = block("", True)  # takes one of the breakpoints, or counts it as dropped
            if "cache_control" in marker:
                content[-1]["cache_control"] = marker["cache_control"]
        previous = messages[-1] if messages else None
        if (t.tool_results and not t.text and previous is not None and previous["role"] == "user"
                and all(b.get("type") == "tool_result" for b in previous["content"])):
            previous["content"].extend(content)
        else:
            messages.append({"role": t.role, "content": content})
    params["messages"] = messages
    if dropped:
        logger.warning(
            "anthropic allows %d cache breakpoints; %d later flagged blocks sent without one",
            MAX_CACHE_BREAKPOINTS,
            dropped,
        )
    return params


def to_openai(
    conv: Conversation,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """OpenAI chat completions params (also vLLM, Ollama, LiteLLM).

    One ``system`` message per non-empty system block, in order, then the turns with string
    content. ``max_tokens`` (not ``max_completion_tokens``) because the OpenAI-compatible
    servers behind the aliases read that name. Cache flags have no OpenAI equivalent.
    """
    params = _sampling(model, max_tokens, temperature)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": b.text} for b in conv.system if b.text
    ]
    for t in conv.turns:
        if t.tool_calls:
            messages.append({"role": "assistant", "content": t.text or None, "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(dict(c.input), ensure_ascii=False)}}
                for c in t.tool_calls]})
            continue
        for r in t.tool_results:
            # OpenAI's tool message has no error flag: the text says it.
            messages.append({"role": "tool", "tool_call_id": r.call_id,
                             "content": f"Error: {r.text}" if r.is_error else r.text})
        if t.text or not t.tool_results:
            messages.append({"role": t.role, "content": t.text})
    if conv.tools:
        params["tools"] = [{"type": "function", "function": {
            "name": s.name, "description": s.description, "parameters": dict(s.input_schema)}} for s in conv.tools]
    params["messages"] = messages
    return params


def to_gemini(
    conv: Conversation,
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """Gemini ``generateContent`` body.

    Gemini has one system slot, so all system blocks are deduplicated (a block whose text is
    identical to an earlier one is sent once) and joined with a blank line into a single part
    of ``system_instruction``; no key when there is no system text. Turns go to ``contents``
    with assistant as ``model``; a system message never appears inside ``contents``.
    Consecutive same-role turns are kept as they are (not merged) so nothing is reordered.
    The field casing follows the REST examples (``system_instruction``, ``generationConfig``);
    the REST API accepts either casing.
    """
    seen: set[str] = set()
    texts: list[str] = []
    for b in conv.system:
        if b.text and b.text not in seen:
            seen.add(b.text)
            texts.append(b.text)
    params: dict[str, Any] = {}
    if texts:
        params["system_instruction"] = {"parts": [{"text": "\n\n".join(texts)}]}
    names = {c.id: c.name for t in conv.turns for c in t.tool_calls}
    contents: list[dict[str, Any]] = []
    for t in conv.turns:
        role = "model" if t.role == "assistant" else "user"
        if not t.tool_calls and not t.tool_results:
            contents.append({"role": role, "parts": [{"text": t.text}]})
            continue
        parts: list[dict[str, Any]] = [
            {"functionResponse": {"id": r.call_id, "name": names.get(r.call_id, "tool"),
                                  "response": {"error" if r.is_error else "output": r.text}}}
            for r in t.tool_results]
        if t.text:
            parts.append({"text": t.text})
        parts += [{"functionCall": {"id": c.id, "name": c.name, "args": dict(c.input)}} for c in t.tool_calls]
        contents.append({"role": role, "parts": parts})
    params["contents"] = contents
    if conv.tools:
        params["tools"] = [{"functionDeclarations": [
            {"name": s.name, "description": s.description, "parameters": gemini_schema(s.input_schema)}
            for s in conv.tools]}]
    config: dict[str, Any] = {}
    if max_tokens is not None:
        config["maxOutputTokens"] = max_tokens
    if temperature is not None:
        config["temperature"] = temperature
    if config:
        params["generationConfig"] = config
    return params


# Keys of JSON Schema that Gemini's function `parameters` (an OpenAPI subset) rejects.
_GEMINI_UNSUPPORTED = frozenset({"additionalProperties", "$schema", "$id", "$defs", "definitions"})


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema as Gemini's parameters accept it: unsupported keywords dropped, recursively."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _GEMINI_UNSUPPORTED:
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: gemini_schema(sub) if isinstance(sub, Mapping) else sub for name, sub in value.items()}
        elif isinstance(value, Mapping):
            out[key] = gemini_schema(value)
        else:
            out[key] = value
    return out


def tool_specs_text(tools: tuple[ToolSpec, ...]) -> str:
    """The tools, for a text format's system text (a prompt string has no tools field)."""
    return "\n".join(f"- {t.name}: {t.description} Input schema: {json.dumps(dict(t.input_schema), sort_keys=True)}"
                     for t in tools)


def plain_text(turn: Turn) -> str:
    """A turn's text with its tool calls and results written out, for the text formats."""
    if not turn.tool_calls and not turn.tool_results:
        return turn.text
    parts = [f"[tool_result{' error' if r.is_error else ''} id={r.call_id}]\n{r.text}" for r in turn.tool_results]
    if turn.text:
        parts.append(turn.text)
    parts += [f"[tool_use {c.name} id={c.id}]\n{json.dumps(dict(c.input), ensure_ascii=False, sort_keys=True)}"
              for c in turn.tool_calls]
    return "\n\n".join(parts)


def _as_text(conv: Conversation) -> Conversation:
    """The conversation with tools folded into text: what the text formats can carry."""
    if not conv.tools and not any(t.tool_calls or t.tool_results for t in conv.turns):
        return conv
    system = conv.system
    if conv.tools:
        system = (*system, SystemBlock("Tools you may call:\n" + tool_specs_text(conv.tools)))
    return Conversation(system, tuple(Turn(t.role, plain_text(t), t.cache) for t in conv.turns))


def _open_prefill(turns: tuple[Turn, ...]) -> tuple[tuple[Turn, ...], Turn | None]:
    """Split off a trailing assistant turn that the text formats leave open (a prefill).

    A trailing blank assistant turn is dropped: it is what the generation prompt says anyway.
    """
    if turns and turns[-1].role == "assistant":
        last = turns[-1]
        return turns[:-1], (last if last.text.strip() else None)
    return turns, None


def _marked(
    start: str,
    end: str,
    assistant: str,
    system_turns: list[str],
    turns: tuple[Turn, ...],
) -> str:
    closed, prefill = _open_prefill(turns)
    out = [f"{start}system\n{text}{end}\n" for text in system_turns]
    for t in closed:
        role = assistant if t.role == "assistant" else "user"
        out.append(f"{start}{role}\n{t.text}{end}\n")
    # Either the open prefill or the bare generation prompt: the model writes next.
    out.append(f"{start}{assistant}\n{prefill.text if prefill else ''}")
    return "".join(out)


def to_chatml(conv: Conversation) -> str:
    """ChatML prompt (Qwen, DeepSeek and others).

    ``<|im_start|>system\\n...<|im_end|>\\n`` per non-empty system block, one block per turn,
    ending with the generation prompt ``<|im_start|>assistant\\n`` (or an open prefill).
    """
    system = [b.text for b in conv.system if b.text]
    return _marked(CHATML_START, CHATML_END, "assistant", system, conv.turns)


def to_gemma(conv: Conversation, *, system_turn: bool = True) -> str:
    """Gemma prompt: ``<start_of_turn>user\\n...<end_of_turn>\\n``, assistant role ``model``,
    ending with the generation prompt ``<start_of_turn>model\\n`` (or an open prefill).

    system_turn=True (default): each non-empty system block is a ``<start_of_turn>system``
    turn. Gemma's own templates have no system role, but the text is unambiguous and
    round-trips through ``intercept``.

    system_turn=False: the Gemma 2/3 chat-template convention. The system text is prepended
    to the first user turn, followed by a blank line; if the conversation does not start with
    a user turn, a user turn holding only the system text is inserted. This does not
    round-trip: ``intercept`` cannot tell that prefix from user text and keeps it in the user
    turn. No ``<bos>`` is emitted (tokenizers add it); unlike the HF template, text is not
    trimmed.
    """
    if system_turn or not conv.system_text:
        system = [b.text for b in conv.system if b.text] if system_turn else []
        return _marked(GEMMA_START, GEMMA_END, "model", system, conv.turns)
    turns = conv.turns
    if turns and turns[0].role == "user":
        first = Turn("user", f"{conv.system_text}\n\n{turns[0].text}", turns[0].cache)
        turns = (first, *turns[1:])
    else:
        turns = (Turn("user", conv.system_text), *turns)
    return _marked(GEMMA_START, GEMMA_END, "model", [], turns)


def to_human_assistant(conv: Conversation) -> str:
    """Legacy Claude text-completion prompt.

    The system text first (no label), then ``\\n\\nHuman: ...`` / ``\\n\\nAssistant: ...`` per
    turn and a final ``\\n\\nAssistant:``; a trailing assistant turn stays open as a prefill
    (``\\n\\nAssistant: text``) instead.
    """
    closed, prefill = _open_prefill(conv.turns)
    out = [conv.system_text]
    for t in closed:
        label = ASSISTANT_LABEL if t.role == "assistant" else HUMAN_LABEL
        out.append(f"\n\n{label} {t.text}")
    out.append(f"\n\n{ASSISTANT_LABEL} {prefill.text}" if prefill else f"\n\n{ASSISTANT_LABEL}")
    return "".join(out)
