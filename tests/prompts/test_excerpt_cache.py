"""prompts/excerpt_cache.py: excerpts kept across assemblies, bounded by entries and by text."""

from __future__ import annotations

import pytest

from cardloop.prompts.excerpt_cache import ExcerptCache
from cardloop.prompts.logs import Excerpt


def _excerpt(n: int, chars: int = 100) -> Excerpt:
    return Excerpt(text=f"{n:04d}" + "x" * (chars - 4), cut=True, total_lines=10, kept_lines=2)


def test_it_holds_at_most_its_characters_oldest_out() -> None:
    cache = ExcerptCache(max_entries=1_000, max_chars=1_600)  # texts up to 100 characters are kept
    for n in range(25):
        cache.put((bytes([n]), 100, True, 1.0), _excerpt(n))
    assert cache.chars == 1_600 and len(cache) == 16 and cache.evictions == 9
    assert cache.get((bytes([24]), 100, True, 1.0)).text.startswith("0024")
    assert cache.get((bytes([8]), 100, True, 1.0)) is None


def test_it_holds_at_most_its_entries() -> None:
    cache = ExcerptCache(max_entries=3)
    for n in range(5):
        cache.put((bytes([n]), 100, False, 1.0), _excerpt(n, 10))
    assert len(cache) == 3 and cache.chars == 30 and cache.evictions == 2


def test_an_excerpt_too_large_to_keep_is_not_kept_and_replaces_nothing() -> None:
    cache = ExcerptCache(max_chars=1_600)  # over 100 characters: not kept
    key = (b"k", 100, True, 1.0)
    cache.put(key, _excerpt(0, 50))
    cache.put(key, _excerpt(1, 500))  # the same key cut anew, too large: the old one goes too
    assert cache.get(key) is None and cache.chars == 0 and cache.evictions == 0


def test_bounds_that_cannot_hold_anything_are_refused() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        ExcerptCache(max_entries=0)
    with pytest.raises(ValueError, match="max_chars"):
        ExcerptCache(max_chars=-1)
