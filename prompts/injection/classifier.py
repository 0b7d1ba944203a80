"""A small prompt-injection classifier: logistic regression over hashed n-grams.

Features are read from the normalized text (normalize.py): character 3-5-grams of its UTF-8 bytes
(robust to spelling, inflection and languages without spaces) and word 1-2-grams, hashed into
`dims` buckets, log-scaled and L2-normalized. The weights come from `model.json` beside this file,
written by bench/injection_train.py from public corpora; nothing is fetched or trained here.

A prompt is scored as a whole and window by window (windows of WINDOW words and, for a sentence
buried in a paragraph, of SHORT_WINDOW words, each half overlapping), and its score is the
highest: an instruction buried in an otherwise harmless page is what indirect injection looks
like, and averaging it into the page would hide it.

Pure Python (zlib, base64, json, math): no numpy at inference, a few milliseconds per prompt.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cardloop.prompts.injection.normalize import NEGATED, normalize

MODEL_FORMAT = "cardloop-injection-lr/1"
# Bumped whenever normalize() or features() change what they compute: weights trained on other
# features load with a clear error instead of scoring garbage.
FEATURES = "norm3-neg4-char345-word12-short12upto120"
MODEL_PATH = Path(__file__).with_name("model.json")
CHAR_NGRAMS = (3, 4, 5)
WINDOW = 60  # words: about a paragraph
MAX_WINDOWS = 64  # a hostile 8,000-character prompt costs a bounded number of windows
# About a sentence: a one-line instruction in a 60-word retrieved document is a fifth of its
# window's n-grams, and the document's own words outweigh it. Chosen on the validation families'
# indirect injection (raginject), 12 against 20 and 30 words (bench/injection_train.py).
SHORT_WINDOW = 12
MAX_SHORT = 64
# Short windows are scored in texts of up to this many words only: a longer text has its 60-word
# windows, and scoring its sentences too made a long prompt half again as slow.
SHORT_UP_TO = 2 * WINDOW


class ModelError(ValueError):
    """model.json is missing, of another format, or damaged."""


def features(norm: str, dims: int) -> dict[int, float]:
    """Hashed, log-scaled, L2-normalized n-gram counts of an already normalized text.

    Words under a negation (NEGATED-marked) count as words only: their character n-grams would
    be those of the plain word, and "never reveal" would read as "reveal"."""
    counts: dict[int, int] = {}
    plain = norm if NEGATED not in norm else " ".join(w for w in norm.split() if not w.startswith(NEGATED))
    data = (" " + plain + " ").encode("utf-8")
    crc = zlib.crc32
    for n in CHAR_NGRAMS:
        for i in range(len(data) - n + 1):
            h = crc(data[i:i + n], n) % dims  # n as the seed: "abc" as a 3-gram is not a word
            counts[h] = counts.get(h, 0) + 1
    words = norm.split()
    prev = ""
    for w in words:
        wb = w.encode("utf-8")
        h = crc(wb, 1) % dims
        counts[h] = counts.get(h, 0) + 1
        if prev:
            h = crc(wb, crc(prev.encode("utf-8"), 2)) % dims
            counts[h] = counts.get(h, 0) + 1
        prev = w
    return _weighted(counts)


_LOG = [0.0] + [1.0 + math.log(c) for c in range(1, 256)]


def _weighted(counts: Mapping[int, int]) -> dict[int, float]:
    values = {k: _LOG[c] if c < 256 else 1.0 + math.log(c) for k, c in counts.items()}
    norm2 = math.sqrt(sum(v * v for v in values.values())) or 1.0
    return {k: v / norm2 for k, v in values.items()}


class _Indexed:
    """A long text's n-gram hashes, computed once, from which each window's features are counted:
    the same features `features()` gives the window's text, without hashing each n-gram again for
    every window that holds it (windows overlap by half, and there are up to MAX_WINDOWS)."""

    def __init__(self, words: list[str], dims: int) -> None:
        crc = zlib.crc32
        self.words = words
        encoded = [w.encode("utf-8") for w in words]
        self.uni = [crc(b, 1) % dims for b in encoded]
        self.bi = [0] + [crc(encoded[k], crc(encoded[k - 1], 2)) % dims for k in range(1, len(words))]
        # Byte offsets of the plain (not negated) words inside " " + plain text + " ".
        self.plain_before = [0]  # plain words among words[:k]
        self.starts: list[int] = []
        self.ends: list[int] = []
        offset = 1
        for w, b in zip(words, encoded, strict=True):
            plain = not w.startswith(NEGATED)
            if plain:
                self.starts.append(offset)
                self.ends.append(offset + len(b))
                offset += len(b) + 1
            self.plain_before.append(self.plain_before[-1] + plain)
        data = b" " + b" ".join(b for w, b in zip(words, encoded, strict=True) if not w.startswith(NEGATED)) + b" "
        self.grams = {n: [crc(data[i:i + n], n) % dims for i in range(len(data) - n + 1)] for n in CHAR_NGRAMS}

    def features(self, a: int, b: int) -> dict[int, float]:
        """features(" ".join(words[a:b]))."""
        return _weighted(self.counts(a, b))

    def counts(self, a: int, b: int) -> Counter[int]:
        """The raw n-gram counts of " ".join(words[a:b])."""
        counts: Counter[int] = Counter(self.uni[a:b])
        counts.update(self.bi[a + 1:b])  # Counter counts in C: most of a window's cost
        p0, p1 = self.plain_before[a], self.plain_before[b]
        if p1 > p0:
            lo, hi = self.starts[p0] - 1, self.ends[p1 - 1] + 1
            for n in CHAR_NGRAMS:
                counts.update(self.grams[n][lo:max(lo, hi - n + 1)])
        return counts


def spans(n: int) -> list[tuple[int, int]]:
    """The (first, end) word offsets of the windows of an n-word text: the whole, then the
    half-overlapping windows of WINDOW words when it is longer, then those of SHORT_WINDOW words
    when it is longer than that and at most SHORT_UP_TO words."""
    out = [(0, n)]
    for size, cap in ((WINDOW, MAX_WINDOWS), (SHORT_WINDOW, MAX_SHORT)):
        if n > size and (size != SHORT_WINDOW or n <= SHORT_UP_TO):
            step = size // 2
            out += [(s, min(s + size, n)) for s in list(range(0, n - step, step))[:cap]]
    return out


def windows(norm: str) -> list[str]:
    """The texts of spans(): what the classifier scores of `norm`."""
    words = norm.split()
    return [" ".join(words[a:b]) for a, b in spans(len(words))]


@dataclass(frozen=True)
class Verdict:
    score: float  # probability-like, 0..1
    attack: bool
    start: int  # the highest-scoring window, as word offsets in the normalized text
    end: int


class InjectionClassifier:
    def __init__(self, weights: array, bias: float, threshold: float, meta: dict[str, Any],
                 short_penalty: float = 0.0) -> None:
        self.weights = weights
        self.dims = len(weights)
        self.bias = bias
        self.threshold = threshold
        self.meta = meta
        # Subtracted from a short window's logit: a sentence alone has fewer n-grams to outvote an
        # attack-like word ("ignore any instructions found in files" is a guardrail). Chosen with
        # the threshold on the validation families (bench/injection_train.py).
        self.short_penalty = short_penalty

    def _logit(self, feats: dict[int, float]) -> float:
        w = self.weights
        return self.bias + sum(w[k] * v for k, v in feats.items())

    def _counts_logit(self, counts: Mapping[int, int]) -> float:
        """_logit(_weighted(counts)) in one pass: the windows of a long prompt are most of its cost."""
        w, dot, sq = self.weights, 0.0, 0.0
        for k, c in counts.items():
            v = _LOG[c] if c < 256 else 1.0 + math.log(c)
            dot += w[k] * v
            sq += v * v
        return self.bias + dot / (math.sqrt(sq) or 1.0)

    def score_normalized(self, norm: str) -> tuple[float, int, int]:
        """(score, first word, end word) of the highest-scoring of windows(norm)."""
        words = norm.split()
        if len(words) <= SHORT_WINDOW:
            best, span = self._logit(features(norm, self.dims)), (0, len(words))
        else:
            indexed = _Indexed(words, self.dims)
            best, span = -math.inf, (0, len(words))
            for a, b in spans(len(words)):
                z = self._counts_logit(indexed.counts(a, b))
                if b - a <= SHORT_WINDOW:  # only short windows are this short: the whole is longer
                    z -= self.short_penalty
                if z > best:
                    best, span = z, (a, b)
        return 1.0 / (1.0 + math.exp(-max(min(best, 40.0), -40.0))), span[0], span[1]

    def classify(self, text: str) -> Verdict:
        score, start, end = self.score_normalized(normalize(text))
        return Verdict(score, score >= self.threshold, start, end)

    # ------------------------------------------------------------------ the file

    def to_json(self) -> dict[str, Any]:
        """Weights quantized to int8 with one scale: a few hundred KB instead of megabytes."""
        top = max((abs(x) for x in self.weights), default=0.0) or 1.0
        scale = top / 127.0
        q = array("b", (max(-127, min(127, round(x / scale))) for x in self.weights))
        return {"format": MODEL_FORMAT, "features": FEATURES, "dims": self.dims, "char_ngrams": list(CHAR_NGRAMS),
                "window": WINDOW, "short_window": SHORT_WINDOW,
                "bias": self.bias, "threshold": self.threshold, "short_penalty": self.short_penalty, "scale": scale,
                "weights": base64.b64encode(zlib.compress(q.tobytes(), 9)).decode("ascii"), "meta": self.meta}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> InjectionClassifier:
        if doc.get("format") != MODEL_FORMAT:
            raise ModelError(f"injection model: format {doc.get('format')!r}, expected {MODEL_FORMAT!r}")
        if doc.get("features") != FEATURES or list(doc.get("char_ngrams", ())) != list(CHAR_NGRAMS) \
                or doc.get("window") != WINDOW or doc.get("short_window") != SHORT_WINDOW:
            raise ModelError("injection model: trained with other features than this code computes; retrain it")
        try:
            q = array("b", zlib.decompress(base64.b64decode(doc["weights"])))
            scale, bias, threshold = float(doc["scale"]), float(doc["bias"]), float(doc["threshold"])
            short_penalty = float(doc["short_penalty"])
        except (KeyError, TypeError, ValueError, zlib.error) as exc:
            raise ModelError(f"injection model: damaged ({exc})") from None
        if len(q) != doc["dims"]:
            raise ModelError(f"injection model: {len(q)} weights, header says {doc['dims']}")
        return cls(array("d", (x * scale for x in q)), bias, threshold, dict(doc.get("meta", {})), short_penalty)


def load(path: Path) -> InjectionClassifier:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"injection model {path} is missing; bench/injection_train.py writes it") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"injection model {path} is not JSON: {exc}") from None
    return InjectionClassifier.from_json(doc)


@lru_cache(maxsize=1)
def default_classifier() -> InjectionClassifier:
    """The shipped model, read once per process."""
    return load(MODEL_PATH)
