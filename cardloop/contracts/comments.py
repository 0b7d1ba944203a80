"""How long a card comment may be, and how a longer one is kept: no pydantic here, so the CLI's
argument check costs nothing at start."""

from __future__ import annotations

# A comment's text in the chat history, at most: a board may send more (a pasted log), and its
# comment is then cut to this (`cut_comment`), never refused; the CLI refuses it (its user is there).
MAX_COMMENT_CHARS = 32_000


def cut_comment(text: str, limit: int = MAX_COMMENT_CHARS) -> str:
    """`text` as the chat history can keep it: whole when it fits, else its head and its tail (a
    pasted log's error is at its end) around a line that says how much was cut."""
    if len(text) <= limit:
        return text
    marker = f"\n\n[... {{}} of {len(text):,} characters cut by cardloop: a comment keeps at most {limit:,} ...]\n\n"
    room = limit - len(marker.format(f"{len(text):,}"))
    head = room * 2 // 3
    tail = room - head
    return text[:head] + marker.format(f"{len(text) - head - tail:,}") + text[len(text) - tail:]
