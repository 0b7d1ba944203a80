"""Chunking a buffer: token-bounded, on line boundaries, overlapping by a few lines, covering
every line, and learning the characters-per-token ratio as it goes."""

from __future__ import annotations

import itertools
import random

import pytest

from cardloop.prompts.research.chunks import line_count, line_starts, split_chunks
from cardloop.prompts.tokens import TokenCounter


def log(lines: int) -> str:
    return "\n".join(f"2026-11-26T10:00:{i % 60:02d}Z INFO [worker] processed batch {i} with {i * 7} events"
                     for i in range(lines)) + "\n"


def test_chunks_are_token_bounded_on_line_boundaries_and_overlap(counter: TokenCounter) -> None:
    text = log(3_000)
    spans = split_chunks(text, counter.count, 500, 3)
    assert len(spans) > 10
    starts = set(line_starts(text))
    for span in spans:
        assert span.tokens == counter.count(text[span.start:span.end]) <= 500
        assert span.start in starts and (span.end in starts or span.end == len(text))
        assert text[span.start:span.end].endswith("\n")  # whole lines only
    for a, b in itertools.pairwise(spans):
        assert b.first_line == a.last_line - 3 + 1  # three lines repeated
        assert b.start < a.end
    assert spans[0].start == 0 and spans[-1].end == len(text)
    assert spans[-1].last_line == len(starts)


def test_no_overlap_and_a_line_longer_than_a_chunk(counter: TokenCounter) -> None:
    text = "short line\n" + "x" * 20_000 + "\nlast line\n"
    spans = split_chunks(text, counter.count, 200, 0)
    assert all(s.tokens <= 200 for s in spans)
    assert [s.first_line for s in spans] == sorted({s.first_line for s in spans})  # always moves forward
    assert spans[-1].last_line == 3


def test_empty_and_bad_settings(counter: TokenCounter) -> None:
    assert split_chunks("", counter.count, 100, 2) == []
    with pytest.raises(ValueError):
        split_chunks("a\n", counter.count, 8, 0)


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nb", "\n", "\n\n", "a\n\nb\n", "x\n\n\ny"])
def test_line_count_is_the_number_of_line_starts(text: str) -> None:
    assert line_count(text) == (len(line_starts(text)) if text else 0)


AWKWARD = ["", " ", "  ", "\t", "\r", "    indented", "ERROR: x", "foo)", "it's", "'s", "ça va ✓", "123456", "...",
           "\u00a0nbsp", "\u3000wide", "x  ", "(", '{"k": 1}', "\x1c", "\u2028", "--", "日本語", "a'll"]


def test_cl100k_counts_add_up_at_lines_starting_visibly_so_trimmed_chunks_need_no_recount() -> None:
    """What splits_at_lines relies on, on text made to break it (empty, blank and indented lines,
    CRLF, separators Python calls space and the tokenizer does not, contractions, CJK), and the
    chunks it makes: the same as recounting every trimmed chunk."""
    counter = TokenCounter()
    assert counter.splits_at_lines and not counter.with_calibration(1.1).splits_at_lines
    rng = random.Random(7)
    for _ in range(400):
        lines = [rng.choice(AWKWARD) + rng.choice(AWKWARD) for _ in range(rng.randint(2, 40))]
        text = rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n", "\n\n"])
        for cut in line_starts(text)[1:]:
            if not text[cut].isspace():
                assert counter.raw(text) == counter.raw(text[:cut]) + counter.raw(text[cut:]), (text, cut)
        for chunk_tokens in (16, 24, 40):
            assert split_chunks(text, counter.count, chunk_tokens, 1, splits_at_lines=True) == \
                   split_chunks(text, counter.count, chunk_tokens, 1)
