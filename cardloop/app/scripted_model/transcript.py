"""Transcripts: which replies the scripted model gives each stage, read from JSON and checked so a
typo in a demo's file is named instead of silently answering BLOCKED."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cardloop.contracts.errors import InputError

STAGES: tuple[str, ...] = ("planning", "coding", "review", "testing", "error_fixing")
# A transcript may also hold "default": the replies for a stage it does not list.
TRANSCRIPT_KEYS: tuple[str, ...] = (*STAGES, "default")
_STAGE_ALIASES = {"code_review": "review", "error_fix": "error_fixing"}


class TranscriptError(InputError, ValueError):
    """A transcript file or mapping is unusable; the message names the file and the entry."""


def normalize_stage(name: str) -> str:
    """"Code review", "code-review", "review" -> "review"; "Error fixing" -> "error_fixing"."""
    key = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return _STAGE_ALIASES.get(key, key)


def check_transcript(data: Any, source: str) -> dict[str, list[Any]]:
    if not isinstance(data, Mapping):
        raise TranscriptError(
            f"{source}: a transcript must be a JSON object mapping a stage to a list of replies, "
            f"got {type(data).__name__}"
        )
    out: dict[str, list[Any]] = {}
    for raw_key, replies in data.items():
        if not isinstance(raw_key, str):
            raise TranscriptError(f"{source}: stage names must be strings, got {raw_key!r}")
        if raw_key.startswith("_"):
            continue  # "_about" and friends: comments, JSON has no other kind
        stage = normalize_stage(raw_key)
        if stage not in TRANSCRIPT_KEYS:
            raise TranscriptError(
                f"{source}: unknown stage {raw_key!r}; expected one of: {', '.join(TRANSCRIPT_KEYS)}"
            )
        if stage in out:
            raise TranscriptError(f"{source}: stage {stage!r} is given twice (as {raw_key!r} too)")
        if isinstance(replies, str) or not isinstance(replies, Sequence):
            raise TranscriptError(
                f"{source}: stage {raw_key!r}: expected a list of reply strings, got {type(replies).__name__}"
            )
        if not replies:
            raise TranscriptError(f"{source}: stage {raw_key!r} has no replies")
        for i, reply in enumerate(replies, 1):
            where = f"{source}: stage {raw_key!r} reply {i}"
            if isinstance(reply, list):
                _check_blocks(reply, where)
                continue
            if not isinstance(reply, str):
                raise TranscriptError(f"{where}: expected a string or a list of content blocks, "
                                      f"got {type(reply).__name__}")
            if not reply.strip():
                raise TranscriptError(f"{where} is empty")
        out[stage] = list(replies)
    return out


def _check_blocks(blocks: list[Any], where: str) -> None:
    """A reply given as content blocks: text blocks and tool_use blocks ({"type": "tool_use",
    "name": ..., "input": {...}}, an "id" optional), as the Messages API answers them."""
    if not blocks:
        raise TranscriptError(f"{where}: an empty list of content blocks")
    for j, block in enumerate(blocks, 1):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            continue
        if kind == "tool_use" and isinstance(block.get("name"), str) and isinstance(block.get("input"), Mapping):
            continue
        raise TranscriptError(f"{where} block {j}: expected a non-empty text block or a tool_use block "
                              "with a name and an input object")


def load_transcript(path: str | Path) -> dict[str, list[Any]]:
    """Read a transcript file: a JSON object {stage: [reply, ...]} (keys starting with "_" are
    comments). Raises TranscriptError naming the file and what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TranscriptError(f"transcript {p}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"transcript {p}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"transcript {p}: not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") \
            from None
    return check_transcript(data, f"transcript {p}")
