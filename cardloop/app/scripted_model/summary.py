"""The summarizer: a deterministic extractive summary for summarization requests, so history
summarization runs offline on the real input instead of on a canned reply."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cardloop.app.scripted_model.wire import content_text

SUMMARY_HEADING = "# Summarize a card's conversation"

_TAG_LINE = re.compile(r"^</?[\w:.-]+(\s[^>]*)?>\Z")
_DECISION = re.compile(r"\b(decided|decision|agreed|approved|lgtm|we will|let's|chose)\b", re.IGNORECASE)
_ERROR = re.compile(r"(error|exception|traceback|failed|failure|crashloop)", re.IGNORECASE)
_REMAINING = re.compile(r"(- \[ \]|\btodo\b|\bremain|\bleft:|\bnext\b|\bstill open\b|\bopen question)",
                        re.IGNORECASE)
_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|md|toml|ya?ml|json|sql|ts|js|go|rs|txt|cfg|ini|sh)\b")


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not _TAG_LINE.match(line):
            out.append(line[:200])
    return out


def _pick(lines: list[str], pattern: re.Pattern[str], limit: int) -> list[str]:
    seen: list[str] = []
    for line in lines:
        if pattern.search(line) and line not in seen:
            seen.append(line)
            if len(seen) == limit:
                break
    return seen


def _section(title: str, items: list[str]) -> str:
    body = "\n".join(f"- {item}" for item in items) if items else "none"
    return f"## {title}\n{body}"


def summarize(messages: Sequence[Mapping[str, Any]]) -> str:
    """A deterministic extractive summary of a summarization request's messages, under the
    headings prompts/templates/summarize.md asks for. Simple, but it reads the real input."""
    turns = [(str(m.get("role")), _lines(content_text(m.get("content")))) for m in messages]
    everything = [line for _, lines in turns for line in lines]
    requested: list[str] = []
    for role, lines in turns:
        if role == "user" and lines and lines[0] not in requested:
            requested.append(lines[0])
    paths: list[str] = []
    for line in everything:
        for path in _PATH.findall(line):
            if path not in paths:
                paths.append(path)
    assistant = [lines for role, lines in turns if role == "assistant" and lines]
    state = [assistant[-1][0]] if assistant else []
    return "\n\n".join([
        _section("Requested", requested[:6]),
        _section("Decisions", _pick(everything, _DECISION, 5)),
        _section("Errors", _pick(everything, _ERROR, 5)),
        _section("Code", [", ".join(paths[:12])] if paths else []),
        _section("State", state),
        _section("Remaining", _pick(everything, _REMAINING, 5)),
    ])
