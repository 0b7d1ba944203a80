"""The redaction cache: what it keeps is bounded, and what it does not keep is still redacted."""

from __future__ import annotations

from collections import Counter

import pytest

from cardloop.prompts.scrub import Scrubber
from tests.prompts.fake_secrets import ANTHROPIC, GITHUB_PAT


def log(i: int, lines: int) -> str:
    return "\n".join(f"build {i} step {j}: compiling module_{j} ok" for j in range(lines))


def test_the_cache_holds_at_most_its_characters_however_many_logs_pass() -> None:
    scrubber = Scrubber(max_chars=200_000)
    for i in range(200):  # about 10,000 characters each: 2 MB in all
        scrubber.scrub(log(i, 250))
    assert 0 < scrubber.chars <= 200_000
    assert len(scrubber._cache) < 200


def test_the_cache_holds_at_most_its_entries() -> None:
    scrubber = Scrubber(max_entries=10)
    for i in range(50):
        scrubber.scrub(f"note {i}")
    assert len(scrubber._cache) == 10
    assert scrubber.chars == sum(len(f"note {i}") for i in range(40, 50))
    assert scrubber.evictions == 40  # bench/assemble_memory.py reads it: the cache is full


def test_a_text_too_large_to_cache_is_still_redacted_every_time_and_counted() -> None:
    scrubber = Scrubber(max_chars=16_000)  # texts over 1,000 characters are not cached
    big = log(0, 40) + f"\nexport ANTHROPIC_API_KEY={ANTHROPIC}\n" + log(1, 40)
    assert len(big) > 1_000
    for _ in range(2):
        found: Counter[str] = Counter()
        out = scrubber.scrub(big, found)
        assert ANTHROPIC not in out and "[REDACTED:" in out
        assert sum(found.values()) >= 1
    assert scrubber.chars == 0 and not scrubber._cache


def test_a_cached_text_reports_its_rules_on_every_hit() -> None:
    scrubber = Scrubber()
    text = f"token {GITHUB_PAT} in a comment"
    first: Counter[str] = Counter()
    second: Counter[str] = Counter()
    assert scrubber.scrub(text, first) == scrubber.scrub(text, second)
    assert first == second and sum(first.values()) == 1
    assert scrubber.chars == len(scrubber.scrub(text))


def test_bounds_that_cannot_hold_anything_are_refused() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        Scrubber(max_entries=0)
    with pytest.raises(ValueError, match="max_chars"):
        Scrubber(max_chars=-1)
    assert Scrubber(max_chars=0).scrub("plain text") == "plain text"  # nothing kept, still redacted
