"""Split a buffer into token-bounded chunks on line boundaries, with a small overlap.

Why line boundaries: a log line cut in half loses the error string an analyst must quote.
Why an overlap: a traceback that starts at the end of one chunk is read whole in the next.
Why counting per chunk, not per line: a 40 MB log has ~500,000 lines; one tokenizer call
per line costs more than the whole rest of the pipeline, while one call per candidate chunk
tokenizes the text about once. Lines are gathered by a character estimate first, then the
chunk is counted and trimmed until it fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# A conservative guess of characters per token for logs (cl100k gives ~3.5-4.5 on log text);
# only the first cut uses it, the exact count decides.
CHARS_PER_TOKEN_GUESS = 4.0


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """Lines [first_line, last_line] (1-based, inclusive) = text[start:end]."""

    first_line: int
    last_line: int
    start: int
    end: int
    tokens: int


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins (the last line may lack a newline)."""
    starts = [0]
    find = text.find
    pos = find("\n")
    while pos != -1:
        if pos + 1 < len(text):
            starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


def line_count(text: str) -> int:
    """len(line_starts(text)) without the list: a 40 MB log's 500,000 offsets are not needed
    to know how many lines it has (a final newline ends the last line, it starts none)."""
    return text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0


def split_chunks(text: str, count: Callable[[str], int], chunk_tokens: int, overlap_lines: int, *,
                 splits_at_lines: bool = False) -> list[ChunkSpan]:
    """Chunks of at most `chunk_tokens` tokens (a single overlong line is cut at its own
    chunk's end), each starting `overlap_lines` lines before the previous one ended.

    `splits_at_lines`: `count` is a tokenizer whose pieces never cross the start of a line that
    begins with a visible character (cl100k_base, uncalibrated: its pre-tokenizer ends every
    piece holding a newline at the last newline of its whitespace run, and BPE merges only
    within a piece). Then a chunk trimmed at such a line has the count of the untrimmed one
    minus the count of the lines dropped, which are a few, instead of a recount of the many
    kept: a quarter of the chunks of a log are trimmed once. Same chunks, same counts."""
    if chunk_tokens < 16:
        raise ValueError("chunk_tokens must be at least 16")
    if not text:
        return []
    starts = line_starts(text)
    n = len(starts)
    ratio = CHARS_PER_TOKEN_GUESS  # learnt from each chunk counted: the next guess is usually right
    spans: list[ChunkSpan] = []
    first = 0
    while first < n:
        target_chars = max(16, int(chunk_tokens * ratio * 0.97))
        # Lines first..last-1 by the character estimate, at least one.
        last = first + 1
        begin = starts[first]
        while last < n and starts[last] - begin < target_chars:
            last += 1
        end = starts[last] if last < n else len(text)
        tokens = count(text[begin:end])
        while tokens > chunk_tokens and last - first > 1:
            # Too many tokens: drop lines from the end in proportion to the excess, then recount.
            keep = max(1, int((last - first) * chunk_tokens / tokens * 0.95))
            last = first + min(keep, last - first - 1)
            cut = starts[last]
            if splits_at_lines and not text[cut].isspace():
                tokens -= count(text[cut:end])
            else:
                tokens = count(text[begin:cut])
            end = cut
        if tokens > chunk_tokens:  # one line alone is too long: keep its head
            end = begin + target_chars
            tokens = count(text[begin:end])
        spans.append(ChunkSpan(first + 1, last, begin, end, tokens))
        if tokens:
            ratio = (end - begin) / tokens
        if last >= n:
            break
        # The next chunk repeats the last few lines, but always moves forward.
        first = max(first + 1, last - overlap_lines)
    return spans


# What the store keeps of a buffer and its chunks (cardloop/store/research.py), as plain values
# the index and the activities share.


@dataclass(frozen=True, slots=True)
class Buffer:
    buffer_id: int
    name: str
    blob_ref: str
    size: int
    lines: int
    tokens: int
    chunk_tokens: int
    overlap_lines: int
    first_chunk: int
    chunks: int


@dataclass(frozen=True, slots=True)
class Chunk:
    chunk_id: int
    buffer_id: int
    first_line: int
    last_line: int
    start: int
    end: int
    tokens: int
