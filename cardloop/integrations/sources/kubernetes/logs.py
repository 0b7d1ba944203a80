"""A pod's logs: the tail of a streamed log bounded in bytes, how the excerpt budget is split
between the instance that crashed and the current one, and the sections an item shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cardloop.prompts.logs import Counter, excerpt_log, strip_ansi


@dataclass
class PodLog:
    """One fetched log, or why there is none."""

    label: str
    blob: str
    text: str | None = None
    missing: str | None = None
    dropped_bytes: int = 0


def read_tail(response: Any, max_bytes: int) -> tuple[str, int]:
    """The last `max_bytes` of a streamed body, cut at a line start, and how many bytes went.

    Why stream: `tail_lines` bounds lines, not bytes; one runaway line (a JSON dump, a minified
    bundle) could otherwise pull gigabytes into the worker. The tail is where a crash is."""
    buf = bytearray()
    dropped = 0
    for chunk in response.stream(64 * 1024, decode_content=True):
        buf += chunk
        if len(buf) > 2 * max_bytes:  # trim in batches, not per chunk
            dropped += len(buf) - max_bytes
            del buf[: len(buf) - max_bytes]
    if len(buf) > max_bytes:
        dropped += len(buf) - max_bytes
        del buf[: len(buf) - max_bytes]
    if dropped:
        newline = buf.find(b"\n")
        if 0 <= newline < len(buf) - 1:  # drop the partial first line (and a split UTF-8 char)
            dropped += newline + 1
            del buf[: newline + 1]
    return bytes(buf).decode("utf-8", "replace"), dropped


def split_budget(logs: list[PodLog], excerpt_tokens: int, *, crash_first: bool) -> list[int]:
    """Token budgets per log: two thirds to the instance that crashed when there are two.

    `logs` is [previous, current] or [current]. When the container runs again, the
    previous instance holds the crash; when it waits in back-off, the latest one does."""
    present = [log.text for log in logs]
    if len(logs) < 2 or not all(present):
        return [excerpt_tokens if text else 0 for text in present]
    major = excerpt_tokens * 2 // 3
    minor = excerpt_tokens - major
    return [major, minor] if crash_first else [minor, major]


def log_sections(logs: list[PodLog], budgets: list[int], count: Counter, *, tail_lines: int,
                 max_log_bytes: int) -> list[str]:
    lines: list[str] = []
    for log, budget in zip(logs, budgets, strict=True):
        if log.text is None:
            lines.append(f"{log.label}: not available ({log.missing})")
            continue
        if not log.text.strip():
            lines.append(f"{log.label}: empty")
            continue
        # Colour codes cost tokens and say nothing (as for GitHub Actions logs); the blob keeps them.
        excerpt = excerpt_log(strip_ansi(log.text), max(budget, 1), count)
        kept = f"tail of {tail_lines} lines asked for; {excerpt.describe()}"
        if log.dropped_bytes:
            kept += f"; the {log.dropped_bytes:,} bytes before the last {max_log_bytes:,} not kept"
        lines.append(f"{log.label} ({kept}):")
        lines.append(excerpt.text)
    return lines
