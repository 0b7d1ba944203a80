"""Reading a transcript written as text: ChatML and Gemma markers (with or without a system
turn) and legacy `Human:` / `Assistant:` labels, as a whole request or embedded in a system
text (intercept.py says what becomes of each part), and cleaning system text of them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cardloop.prompts.formats.render import (
    ASSISTANT_LABEL,
    CHATML_END,
    CHATML_START,
    GEMMA_END,
    GEMMA_START,
    HUMAN_LABEL,
)

# Tokens that may surround a transcript (BOS/EOS, pad) but carry no conversation text.
_NOISE_TOKENS = ("<bos>", "<eos>", "<pad>", "<s>", "</s>", "<|endoftext|>")
_MARKER_TOKENS = (CHATML_START, CHATML_END, GEMMA_START, GEMMA_END)

# Legacy Claude turns are delimited by a blank line before the label (or the label opening
# the text); this strict form is what to_human_assistant writes.
_STRICT_SPLIT = re.compile(r"\n\n(Human|Assistant):")
_STRICT_FIND = re.compile(r"(?:\A|\n\n)(?:Human|Assistant):")
# Hand-written transcripts often use one newline: labels at a line start.
_LENIENT_SPLIT = re.compile(r"(?m)^[ \t]*(Human|Assistant):")
_LENIENT_HUMAN = re.compile(r"(?m)^[ \t]*Human:")
_LENIENT_ASSISTANT = re.compile(r"(?m)^[ \t]*Assistant:")

# (kind, text) where kind is "system", "user" or "assistant".
Segment = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    start: str
    end: str
    # Lower-cased role header -> "system" | "user" | "assistant" | "tool".
    roles: Mapping[str, str]


_CHATML = _Family(
    "chatml",
    CHATML_START,
    CHATML_END,
    {
        "system": "system",
        "developer": "system",
        "user": "user",
        "assistant": "assistant",
        "tool": "tool",
        "function": "tool",
        "ipython": "tool",
        "observation": "tool",
    },
)
_GEMMA = _Family(
    "gemma",
    GEMMA_START,
    GEMMA_END,
    {
        "system": "system",
        "user": "user",
        "model": "assistant",
        "assistant": "assistant",
        "tool": "tool",
    },
)
_FAMILIES = {"chatml": _CHATML, "gemma": _GEMMA}


def scrub_markers(text: str) -> str:
    """Remove chat-template markers and noise tokens; trim the result."""
    for token in (*_MARKER_TOKENS, *_NOISE_TOKENS):
        text = text.replace(token, "")
    return text.strip()


def _human_position(text: str) -> int | None:
    """Where a legacy Human/Assistant transcript starts in `text`, if it is one.

    The strict form (label at the start or after a blank line) is enough; the lenient form
    (labels at line starts) needs both labels, so a text that merely has a line starting with
    "Human:" is not mistaken for a transcript.
    """
    strict = _STRICT_FIND.search(text)
    if strict:
        return strict.start()
    human = _LENIENT_HUMAN.search(text)
    assistant = _LENIENT_ASSISTANT.search(text)
    if human and assistant:
        return min(human.start(), assistant.start())
    return None


def text_family(text: str) -> str | None:
    """The text format of a whole prompt: the family whose marker comes first."""
    found: list[tuple[int, str]] = []
    for family in (_CHATML, _GEMMA):
        pos = text.find(family.start)
        if pos >= 0:
            found.append((pos, family.name))
    pos = _human_position(text)
    if pos is not None:
        found.append((pos, "human"))
    return min(found)[1] if found else None


def embedded_family(text: str) -> str | None:
    """The transcript format embedded in a system text, if any.

    Stray end markers count too (they must be cleaned), but a Human/Assistant transcript
    needs both labels at line starts: "Human:" mid-line, or a single labelled line, is prose.
    """
    found: list[tuple[int, str]] = []
    for family in (_CHATML, _GEMMA):
        positions = [p for p in (text.find(family.start), text.find(family.end)) if p >= 0]
        if positions:
            found.append((min(positions), family.name))
    human = _LENIENT_HUMAN.search(text)
    assistant = _LENIENT_ASSISTANT.search(text)
    if human and assistant:
        found.append((min(human.start(), assistant.start()), "human"))
    return min(found)[1] if found else None


def _parse_marked(
    text: str, family: _Family, *, embedded: bool
) -> tuple[list[Segment], list[str]]:
    """Split a ChatML / Gemma transcript into segments.

    Turn text is exactly what lies between the role line's newline and the end marker, so
    rendered text comes back unchanged. Text outside any turn is instruction text when the
    transcript is embedded in a system text, and a user turn (with a warning) otherwise.
    """
    segments: list[Segment] = []
    warnings: list[str] = []

    def loose(piece: str) -> None:
        cleaned = scrub_markers(piece)
        if not cleaned:
            return
        if embedded:
            segments.append(("system", cleaned))
        else:
            warnings.append(f"text outside {family.name} turns kept as a user turn")
            segments.append(("user", cleaned))

    pieces = text.split(family.start)
    loose(pieces[0])
    last = len(pieces) - 2
    for index, piece in enumerate(pieces[1:]):
        inner, closed, tail = piece.partition(family.end)
        header, _, body = inner.partition("\n")
        kind = family.roles.get(header.strip().lower())
        if kind is None:
            # Unknown role: keep all of it, role name included, as user text.
            if inner.strip():
                warnings.append(
                    f"unknown {family.name} role {header.strip()[:40]!r} kept as a user turn"
                )
                segments.append(("user", inner))
        elif not closed and index == last and kind == "assistant" and not body.strip():
            pass  # the trailing generation prompt: the model speaks next, no turn
        elif kind == "tool":
            segments.append(("user", f"[tool result]\n{body}"))
        else:
            segments.append((kind, body))
        loose(tail)
    return segments, warnings


def _parse_human(text: str) -> list[Segment]:
    """Split a legacy Human/Assistant transcript; the text before the first label is system.

    The strict form (blank line before each label) keeps text exactly: one space after the
    label is the separator. Only a text with no strict delimiter at all is split at line-start
    labels (the lenient one-newline form), trimming each turn.
    """
    # A blank-line delimiter means the strict form: to_human_assistant always writes one, and
    # then a one-newline "Human:" line inside a turn (or the system text) stays text. A label
    # opening the text is not enough: "Human: a\nAssistant: b" is the lenient form.
    use_strict = _STRICT_SPLIT.search(text) is not None
    if use_strict:
        padded = "\n\n" + text if text.startswith((HUMAN_LABEL, ASSISTANT_LABEL)) else text
        parts = _STRICT_SPLIT.split(padded)
    else:
        parts = _LENIENT_SPLIT.split(text)
    segments: list[Segment] = []
    lead = parts[0] if use_strict else parts[0].strip()
    if lead.strip():
        segments.append(("system", lead))
    pairs = list(zip(parts[1::2], parts[2::2], strict=True))
    for index, (label, raw) in enumerate(pairs):
        # Strict: drop only the separator space after the label, so text comes back exact.
        body = (raw[1:] if raw.startswith(" ") else raw) if use_strict else raw.strip()
        if label == "Assistant" and index == len(pairs) - 1 and not body.strip():
            continue  # the trailing "\n\nAssistant:" generation prompt
        segments.append(("assistant" if label == "Assistant" else "user", body))
    return segments


def parse_text(text: str, family: str, *, embedded: bool) -> tuple[list[Segment], list[str]]:
    if family == "human":
        return _parse_human(text), []
    return _parse_marked(text, _FAMILIES[family], embedded=embedded)


def clean_system_text(text: str) -> str:
    """`text` with chat-template markers and role labels stripped, as plain text.

    A text without markers (and without lines starting with both "Human:" and "Assistant:")
    is returned unchanged. Otherwise every piece of the embedded transcript, system parts and
    turns alike, is kept in order and joined with a blank line: nothing is dropped here.
    ``intercept`` goes further and keeps embedded turns as separate turns.
    """
    family = embedded_family(text)
    if family is None:
        return text
    segments, _ = parse_text(text, family, embedded=True)
    return "\n\n".join(p for p in (scrub_markers(body) for _, body in segments) if p)
