"""Lexical ranking of a repository's files against a card: BM25 over passages, plus path and name.

Why BM25 and not embeddings: it needs no model, no network and no GPU, it is deterministic
(the same card ranks the same files on every retry of an activity), and on code it is a strong
baseline when identifiers are split the way people write about them: a card saying "retry
backoff" must find `compute_backoff` in `app/webhooks/retry.py`. So tokenization splits
snake_case, camelCase, paths and dotted names, lowercases, drops a few stop words and strips
the commonest English suffixes ("retries" ~ "retry", "excerpting" ~ "excerpt"); an identifier
of several words also counts whole ("compute_backoff"), so quoting it exactly is rewarded.

A file's score is the BM25 score of its best 60-line passage (k1, b: length normalization
over passages) plus a score for its directory path and name (the basename without its last
extension; weights `path_weight`, `name_weight`, its own saturation and length normalization
`b_path`).
Passages keep long hub files (a README, a big fixture mentioning everything once) from
outranking the file where the card's words occur together; the separate path score keeps a
file named after the card's subject from losing its name in a saturated term count, as it
would with BM25F's single saturation. `BM25Params.content_only()` is plain whole-file content
BM25: the baseline bench/retrieval.py measures against in the same run (on this repository's
own history: recall@5 0.55 against 0.47).

Cost: the index is built once per checkout sha (the caller keeps it in an `IndexCache`) and
keeps, per term, a posting list of (passage or file, precomputed idf x saturated tf). A query
is a sparse dot product: only the postings of the query's terms are touched, never every
document. Tokenizing runs regular expressions and C-level counting over whole texts; the
Python-level work is per distinct token of a passage (memoized splitting and stemming), not
per occurrence. Measured on 5,000 real Python files (33 MB): about 3 s to index, about 5 ms
per query.
"""

from __future__ import annotations

import heapq
import math
import re
import sys
import threading
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Container, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

# --- tokenization --------------------------------------------------------------------------

# Only words that carry no meaning in prose *or* code; everything else is left to idf.
_STOP_TEXT = """a an and are as at be been but by can could did do does for from had has have he her his
    how i if in into is it its me my no not of on or our she so than that the their them then
    there these they this those to too us was we were what when where which who why will with
    would you your self def return import"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_TEXT.split())

_MAX_NUMBER_LEN = 6  # "404", "30", "2024" matter; a hex blob or a long id does not


def stem(word: str) -> str:
    """A light suffix stripper (not Porter): plural, -ing, -ed and a final e.

    Applied to document and query words alike, so it only has to be consistent, not
    linguistically right: "cache", "caches", "cached" and "caching" all become "cach".
    """
    n = len(word)
    if n <= 3 or word.isdigit():
        return word
    if word.endswith(("ies", "ied")) and n > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ing") and n > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and n > 4:
        word = _undouble(word[:-2])
    elif word.endswith(("ches", "shes", "xes", "zes")) and n > 4:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and n > 3:
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    # "running" -> "runn" -> "run", so it meets "run"; "called" -> "call" stays (ll is common).
    if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word


_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

# Raw token ("getHTTPResponse", "compute_backoff") -> its index terms. Distinct tokens repeat
# across the files of a repository, so most lookups hit; bounded so a hostile repository
# cannot grow it without end.
_TERMS: dict[str, tuple[str, ...]] = {}
_TERMS_MAX = 1_000_000


def _word_term(word: str) -> str | None:
    if word in STOP_WORDS or len(word) < 2 or (word.isdigit() and len(word) > _MAX_NUMBER_LEN):
        return None
    return stem(word)


def _terms_of(token: str) -> tuple[str, ...]:
    terms = _TERMS.get(token)
    if terms is not None:
        return terms
    parts = _PARTS.findall(token)
    out = [t for t in (_word_term(p.lower()) for p in parts) if t is not None]
    # An identifier made of several words ("compute_backoff", "TokenCounter") also counts as
    # itself: a card quoting it exactly should find the file defining it ahead of files that
    # merely use both words.
    core = token.strip("_")
    if len(parts) > 1 and len(core) >= 5 and not core.isdigit():
        out.append(core.lower())
    terms = tuple(out)
    if len(_TERMS) < _TERMS_MAX:
        _TERMS[token] = terms  # a dict store is atomic under the GIL; a race only recomputes
    return terms


def term_counts(text: str) -> dict[str, int]:
    """Index terms of `text` with their counts (snake_case, camelCase, paths and dotted
    names split; lowercased; stop words dropped; lightly stemmed; compounds kept whole too)."""
    out: dict[str, int] = {}
    get = out.get
    memo = _TERMS
    # C-level tokenizing and counting; the Python loop is per distinct token, memoized.
    for token, n in Counter(_TOKEN.findall(text)).items():
        terms = memo.get(token)
        if terms is None:
            terms = _terms_of(token)
        for term in terms:
            out[term] = get(term, 0) + n
    return out


def tokenize(text: str) -> list[str]:
    """Index terms of `text` in order."""
    return [term for token in _TOKEN.findall(text) for term in _terms_of(token)]


def path_fields(path: str) -> tuple[str, str]:
    """(directory part, name part) of a repository path, as texts to tokenize.

    The extension belongs to neither: "py" in every Python file's path says nothing. Only the
    last one is dropped: the dots before it are part of the name (`test/res.send.js` is about
    res.send, `app.routes.error.js` about routes and errors; `.eslintrc.yml` is `.eslintrc`).
    """
    directory, _, base = path.rpartition("/")
    name = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    return directory, name


# --- the index -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BM25Params:
    """k1: term frequency saturation; b / b_path: length normalization of a passage's content
    and of a path (0 = none, 1 = full); path_weight / name_weight: what one occurrence of a word
    in the directory path / the file's name counts; passage_lines: the content is scored per
    passage of this many lines, a file by its best passage (0: whole files)."""

    k1: float = 1.2
    b: float = 0.75
    b_path: float = 0.3
    path_weight: float = 1.0
    name_weight: float = 2.0
    passage_lines: int = 60
    # A long query (a pasted log) is cut to its most telling terms: bounded work per query.
    max_query_terms: int = 64

    @classmethod
    def content_only(cls) -> BM25Params:
        """Plain BM25 over whole files' content, no path or name: the baseline."""
        return cls(path_weight=0.0, name_weight=0.0, passage_lines=0)


def _passages(text: str, size: int) -> list[tuple[int, str]]:
    if size <= 0:
        return [(0, text)]
    lines = text.split("\n")
    return [(i, "\n".join(lines[i : i + size])) for i in range(0, len(lines), size)]


_EMPTY: dict[str, int] = {}


class BM25Index:
    """BM25 over passages of each file's content, plus a path and name score, built once.

    Why passages: a file is about its best part. Whole-file BM25 favours long hub files (a
    README, a big fixture) that contain every word of a card somewhere; the best 60-line
    passage favours the file where the card's words occur together. Why a separate path
    score: a file named `refunds.py` is about refunds however often its text says so; had the
    name been added to the content's term frequency (BM25F) it would be lost in a saturated
    count. Both are precomputed per posting, so a query only multiplies and adds.
    """

    def __init__(self, documents: Iterable[tuple[str, str]], params: BM25Params | None = None) -> None:
        self.params = p = params or BM25Params()
        k1 = p.k1
        self.paths: list[str] = []
        owner = array("i")   # passage -> file
        starts = array("i")  # passage -> its first line (0-based)
        passage_terms: list[dict[str, int]] = []
        path_terms: list[dict[str, float]] = []
        file_df: Counter[str] = Counter()  # files containing a term anywhere
        use_path = bool(p.path_weight or p.name_weight)
        for doc_id, (path, text) in enumerate(documents):
            self.paths.append(path)
            seen: set[str] = set()
            for start, passage in _passages(text, p.passage_lines):
                counts = term_counts(passage)
                passage_terms.append(counts)
                owner.append(doc_id)
                starts.append(start)
                seen.update(counts)
            weighted: dict[str, float] = {}
            if use_path:
                directory, name = path_fields(path)
                for term, n in term_counts(directory).items():
                    weighted[term] = weighted.get(term, 0.0) + n * p.path_weight
                for term, n in term_counts(name).items():
                    weighted[term] = weighted.get(term, 0.0) + n * p.name_weight
                seen.update(weighted)
            path_terms.append(weighted)
            file_df.update(seen)
        self._ids = {path: i for i, path in enumerate(self.paths)}
        self._owner = owner
        self._starts = starts
        n_files = len(self.paths)
        self._idf: dict[str, float] = {}
        # Content: per (term, passage) idf * saturated, length-normalized tf; idf over passages.
        self._postings = self._build(passage_terms, p.b, k1, idf_of=None, store_idf=True)
        # Path and name: per (term, file); idf over files (how telling the word is in this
        # repository, wherever it occurs).
        self._path_postings: dict[str, tuple[array, array]] = {}
        if use_path:
            self._path_postings = self._build(
                path_terms, p.b_path, k1,
                idf_of=lambda df_term: math.log(1.0 + (n_files - file_df[df_term] + 0.5) / (file_df[df_term] + 0.5)),
            )

    def _build(
        self,
        docs: list[dict[str, int]] | list[dict[str, float]],
        b: float,
        k1: float,
        *,
        idf_of: Callable[[str], float] | None,
        store_idf: bool = False,
    ) -> dict[str, tuple[array, array]]:
        n = len(docs)
        lengths = [sum(d.values()) for d in docs]
        avg = max(1e-9, sum(lengths) / n) if n else 1.0
        # One dict lookup per posting, straight into typed arrays: this loop runs once per
        # (term, passage) pair, over a million times for a 40 MB log, so its per-item cost is
        # the build's, and a list of float objects would hold 32 bytes per posting where the
        # array holds 8. Each document's counts are dropped once read (the caller's list is
        # scratch), so the build's peak is not all of them plus all postings.
        lists: dict[str, tuple[array, array]] = {}
        get = lists.get
        for doc_id, length in enumerate(lengths):
            counts = docs[doc_id]
            docs[doc_id] = _EMPTY  # type: ignore[call-overload]
            inv_norm = 1.0 / (1.0 - b + b * length / avg)
            for term, tf in counts.items():
                entry = get(term)
                if entry is None:
                    lists[term] = (array("i", (doc_id,)), array("d", (tf * inv_norm,)))
                else:
                    entry[0].append(doc_id)
                    entry[1].append(tf * inv_norm)
        postings: dict[str, tuple[array, array]] = {}
        k1p1 = k1 + 1.0
        for term, (term_ids, tfs) in lists.items():
            df = len(term_ids)
            idf = idf_of(term) if idf_of else math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            if store_idf:
                self._idf[term] = idf
            scale = idf * k1p1
            postings[term] = (term_ids, array("d", [scale * tf / (k1 + tf) for tf in tfs]))
        return postings

    def __len__(self) -> int:
        return len(self.paths)

    def __contains__(self, path: object) -> bool:
        return path in self._ids

    def nbytes(self) -> int:
        """Roughly what the index holds in memory (terms, postings, dict slots): what a cache
        bounded by bytes charges for it. An estimate from sys.getsizeof of the containers and
        their items; tracemalloc agrees within about 15% for a 10 MB log's chunks."""
        size = sys.getsizeof(self._postings) + sys.getsizeof(self._idf) + sys.getsizeof(self._path_postings)
        size += sys.getsizeof(self._owner) + sys.getsizeof(self._starts) + sys.getsizeof(self._ids)
        size += sum(sys.getsizeof(p) for p in self.paths)
        for postings in (self._postings, self._path_postings):
            for term, (ids, scores) in postings.items():
                # the term, its two arrays, the pair holding them, and the idf float
                size += sys.getsizeof(term) + sys.getsizeof(ids) + sys.getsizeof(scores) + 56 + 24
        return size

    def idf(self, term: str) -> float:
        """How telling a content term is (over passages); 0 for an unknown term."""
        return self._idf.get(term, 0.0)

    def query_weights(self, query: str | Mapping[str, float]) -> dict[str, float]:
        """Term -> weight of a query: repeated words count sublinearly (1 + ln tf), only terms
        the index knows, at most `max_query_terms` of them (highest weight x idf first)."""
        if isinstance(query, str):
            weights: dict[str, float] = {t: 1.0 + math.log(n) for t, n in term_counts(query).items()}
        else:
            weights = {t: w for t, w in query.items() if w > 0}
        known = {t: w for t, w in weights.items() if t in self._postings or t in self._path_postings}
        if len(known) > self.params.max_query_terms:
            top = heapq.nlargest(self.params.max_query_terms, known,
                                 key=lambda t: known[t] * max(self._idf.get(t, 0.0), 1e-6))
            known = {t: known[t] for t in top}
        return known

    def _best_passages(self, weights: Mapping[str, float]) -> dict[int, tuple[float, int]]:
        acc: dict[int, float] = {}
        get = acc.get
        for term, weight in weights.items():
            posting = self._postings.get(term)
            if posting is None:
                continue
            ids, scores = posting
            for pid, s in zip(ids, scores, strict=True):
                acc[pid] = get(pid, 0.0) + weight * s
        best: dict[int, tuple[float, int]] = {}
        owner = self._owner
        for pid, s in acc.items():
            doc_id = owner[pid]
            current = best.get(doc_id)
            if current is None or s > current[0]:
                best[doc_id] = (s, pid)
        return best

    def scores(self, query: str | Mapping[str, float]) -> dict[int, float]:
        """File id -> score for every file matching at least one query term: its best
        passage's content score plus its path and name score."""
        weights = self.query_weights(query)
        acc = {doc_id: s for doc_id, (s, _) in self._best_passages(weights).items()}
        get = acc.get
        for term, weight in weights.items():
            posting = self._path_postings.get(term)
            if posting is None:
                continue
            ids, scores = posting
            for doc_id, s in zip(ids, scores, strict=True):
                acc[doc_id] = get(doc_id, 0.0) + weight * s
        return acc

    def best_lines(self, path: str, query: str | Mapping[str, float]) -> tuple[int, int] | None:
        """The 1-based (first, last) lines of `path`'s passage that matches `query` best."""
        doc_id = self._ids.get(path)
        if doc_id is None:
            return None
        weights = self.query_weights(query)
        best: tuple[float, int] | None = None
        for term, weight in weights.items():
            posting = self._postings.get(term)
            if posting is None:
                continue
            ids, scores = posting
            for pid, s in zip(ids, scores, strict=True):
                if self._owner[pid] == doc_id:
                    total = s * weight
                    if best is None or total > best[0]:
                        best = (total, pid)
        if best is None:
            return None
        start = self._starts[best[1]]
        size = self.params.passage_lines
        return start + 1, start + size if size > 0 else start + 1

    def rank(
        self,
        query: str | Mapping[str, float],
        k: int = 10,
        *,
        boosts: Mapping[str, float] | None = None,
        exclude: Container[str] = (),
    ) -> list[tuple[str, float]]:
        """The `k` best (path, score) pairs, best first; ties broken by path for stable output.

        `boosts` multiplies the score of a matching file (one the card's branch changed): it
        reorders relevant files and never brings in one that matches nothing.
        """
        acc = self.scores(query)
        if boosts:
            for path, factor in boosts.items():
                doc_id = self._ids.get(path)
                if doc_id is not None and doc_id in acc:
                    acc[doc_id] *= factor
        paths = self.paths
        candidates = ((score, doc_id) for doc_id, score in acc.items() if paths[doc_id] not in exclude)
        best = heapq.nsmallest(k, candidates, key=lambda sd: (-sd[0], paths[sd[1]]))
        return [(paths[doc_id], score) for score, doc_id in best]


def merge_queries(*parts: tuple[str, float]) -> dict[str, float]:
    """One weighted query from several texts: (text, weight) each, e.g. the card's title
    counting twice as much as a long body. Repeats within a part count sublinearly."""
    out: dict[str, float] = {}
    for text, weight in parts:
        if not text or weight <= 0:
            continue
        for term, n in term_counts(text).items():
            out[term] = out.get(term, 0.0) + weight * (1.0 + math.log(n))
    return out


# --- a small cache of built indexes ----------------------------------------------------------

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class IndexCache(Generic[K, V]):
    """Thread-safe LRU of built indexes, keyed by (repository, checkout sha, settings).

    Why an LRU and not a dict: a worker serves many repositories; an index of 5,000 files is
    tens of megabytes, so only the last few are kept. Bounded by entries and, given `size_of`,
    by bytes too: research indexes hold their logs' whole text, so four of 40 MB logs would
    be gigabytes. The entry just used is kept even when it alone is over `max_bytes`: evicting
    it would rebuild it for every activity of the run that is using it.
    """

    def __init__(self, max_entries: int = 4, *, max_bytes: int | None = None,
                 size_of: Callable[[V], int] | None = None) -> None:
        if max_bytes is not None and size_of is None:
            raise ValueError("IndexCache: max_bytes needs size_of")
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._sizes: dict[K, int] = {}
        self._max = max_entries
        self._max_bytes = max_bytes
        self._size_of = size_of
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        size = self._size_of(value) if self._size_of is not None else 0
        with self._lock:
            self._bytes += size - self._sizes.get(key, 0)
            self._entries[key] = value
            self._sizes[key] = size
            self._entries.move_to_end(key)
            self._evict()

    def resize(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        """New bounds (from the worker's config), applied at once."""
        if max_bytes is not None and self._size_of is None:
            raise ValueError("IndexCache: max_bytes needs size_of")
        with self._lock:
            self._max = max_entries if max_entries is not None else self._max
            self._max_bytes = max_bytes if max_bytes is not None else self._max_bytes
            self._evict()

    def _evict(self) -> None:  # the lock is held
        while self._entries and (len(self._entries) > self._max or (
                self._max_bytes is not None and self._bytes > self._max_bytes and len(self._entries) > 1)):
            key, _ = self._entries.popitem(last=False)
            self._bytes -= self._sizes.pop(key)

    def get_or_build(self, key: K, build: Callable[[], V], *, expected_bytes: int = 0) -> V:
        """`expected_bytes`: what the built value will weigh, roughly; entries are evicted for
        it before the build, so the old ones and the new one are not in memory together."""
        value = self.get(key)
        if value is None:
            if expected_bytes and self._max_bytes is not None:
                with self._lock:
                    while self._entries and self._bytes + expected_bytes > self._max_bytes:
                        old, _ = self._entries.popitem(last=False)
                        self._bytes -= self._sizes.pop(old)
            value = build()
            self.put(key, value)
        return value

    @property
    def nbytes(self) -> int:
        """What the entries weigh by `size_of` (0 without it)."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
