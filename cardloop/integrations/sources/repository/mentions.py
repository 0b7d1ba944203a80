"""Which source files a card is about: the files it names (traceback frames, pytest node ids,
`path:line`, blob links, dotted modules), resolved against the checkout, most recently named
first; then the files ranked highest for the card's title, body and latest turn."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field

from cardloop.integrations.sources.ranking import BM25Index, merge_queries, term_counts
from cardloop.integrations.sources.repository.files import indexable
from cardloop.prompts.card import Card

# `File "/app/app/webhooks/retry.py", line 42, in compute_backoff`
_PY_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([\w<>.]+))?')
# `tests/test_retry.py::test_backoff[slow]` or `tests/test_retry.py::TestRetry::test_backoff`
_NODE_ID = re.compile(r"((?:[\w.@+-]+/)*[\w.@+-]+\.py)((?:::[\w.-]+)+)")
# Where _node_ids tries _NODE_ID: a path character after none, or after "/" with none before it.
_NODE_START = re.compile(r"(?<![\w.@+-])(?<![\w.@+-]/)[\w.@+-]")
# A path with an extension, optionally followed by a line: `a/b.go:42`, `a/b.ts(42,7)`, `#L42`.
_PATH = re.compile(
    r"(?<![\w@.+-])((?:[A-Za-z]:)?/?(?:[\w@.+-]+/)*[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,9})"
    r"(?:(?::|#L|\(|\", line )(\d{1,7}))?"
)
# Where _paths tries _PATH: what may begin one, after no path character. A chain: path
# characters with single slashes between, no drive, no leading "/".
_PATH_START = re.compile(r"(?<![\w@.+-])[\w@.+/-]")
_PATH_CHAIN = re.compile(r"[\w@.+-]+(?:/[\w@.+-]+)*")
# `app.webhooks.retry` or `app.webhooks.retry.compute_backoff`: at least two dotted parts.
_MODULE = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/(-])")
# Installed libraries and toolchains: a frame there is not in the repository even when its
# path ends like one of ours (site-packages/celery/app/task.py vs app/task.py).
_FOREIGN = re.compile(
    r"(?:^|/)(?:site-packages|dist-packages|node_modules|\.cargo/registry|go/pkg/mod|\.rustup|"
    r"lib/python\d[\d.]*|usr/lib|usr/local/lib|\.pyenv|\.nvm|\.m2/repository|\.gradle/caches)(?:/|$)"
)
# A pasted log can be megabytes; the mentions worth having are in its head and tail.
_SCAN_CHARS = 200_000
_MAX_LINES_PER_FILE = 6
_MAX_BARE_MATCHES = 2  # "retry.py" alone may name two files; more is a guess, not a mention


@dataclass
class Mention:
    """A file the card names: where (line numbers, function or test names) and how recently
    (`order`: higher is more recent)."""

    path: str
    order: int = 0
    lines: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def add(self, order: int, line: int | None, name: str | None) -> None:
        self.order = max(self.order, order)
        if line and line not in self.lines:
            self.lines.insert(0, line)  # most recent first
            del self.lines[_MAX_LINES_PER_FILE:]
        if name and name not in self.names:
            self.names.insert(0, name)
            del self.names[_MAX_LINES_PER_FILE:]


class PathResolver:
    """Resolves paths as people and tools write them to the repository's own paths."""

    def __init__(self, files: Sequence[str]) -> None:
        self.files = frozenset(files)
        self._by_name: dict[str, list[str]] = {}
        self._by_stem: dict[str, list[str]] = {}
        for path in files:
            name = path.rsplit("/", 1)[-1]
            self._by_name.setdefault(name, []).append(path)
            self._by_stem.setdefault(name.split(".", 1)[0], []).append(path)

    def resolve(self, raw: str) -> list[str]:
        """Repository paths `raw` names: exact, else by the longest matching suffix of path
        components (`/app/app/webhooks/retry.py` -> `app/webhooks/retry.py`)."""
        raw = raw.replace("\\", "/").strip().strip("'\"`")
        while raw.startswith("./"):
            raw = raw[2:]
        if raw in self.files:
            return [raw]
        if _FOREIGN.search(raw):
            return []  # a library's file, however much its path's end looks like ours
        parts = [p for p in raw.split("/") if p and p != "."]
        if not parts:
            return []
        return self._best(parts, self._by_name.get(parts[-1], ()), lambda path: path.split("/"))

    def resolve_module(self, dotted: str) -> list[str]:
        """Files a dotted module path names (`app.webhooks.retry` -> app/webhooks/retry.py,
        or app/webhooks/retry/__init__.py); trailing attribute names are dropped one by one
        (`app.webhooks.retry.compute_backoff`). Two components at least: `retry.compute`
        alone is too likely an attribute access."""
        parts = dotted.split(".")
        while len(parts) >= 2:
            for key in (parts, [*parts, "__init__"]):
                candidates = self._by_stem.get(key[-1], ())
                found = self._best(key, candidates, lambda path: path.rsplit(".", 1)[0].split("/"), min_match=2)
                if found:
                    return found
            parts = parts[:-1]
        return []

    @staticmethod
    def _best(
        parts: Sequence[str], candidates: Sequence[str], split: Callable[[str], list[str]], min_match: int = 0
    ) -> list[str]:
        best: list[str] = []
        best_len = 0
        for path in candidates:
            own = split(path)
            n = 0
            while n < min(len(own), len(parts)) and own[-1 - n] == parts[-1 - n]:
                n += 1
            # A bare name matches by name; a longer path needs the whole repository path as
            # its suffix (a container path) or at least a directory and the name to agree.
            ok = n >= 1 if len(parts) == 1 else (n == len(own) or n >= 2)
            if not ok or n < min_match:
                continue
            if n > best_len:
                best, best_len = [path], n
            elif n == best_len:
                best.append(path)
        if len(parts) == 1 and len(best) > _MAX_BARE_MATCHES:
            return []
        return sorted(best)[:_MAX_BARE_MATCHES]


def card_texts(card: Card) -> list[str]:
    """The card's texts, oldest first: its fields, then every history message (tool calls'
    inputs included: `read_file app/x.py` is a mention too)."""
    texts = ["\n".join(t for t in (card.title, card.body, card.notes) if t)]
    for message in card.history:
        parts = [message.content]
        parts.extend(json.dumps(call.input, ensure_ascii=False) for call in message.tool_calls)
        texts.append("\n".join(p for p in parts if p))
    return texts


def _node_ids(text: str) -> Iterator[re.Match[str]]:
    """_NODE_ID.finditer(text), in linear time. finditer tried every position, and _NODE_ID has
    nothing to anchor it: each one of a long run of path characters (a base64 blob, a minified
    bundle) was matched to the run's end (100,000 characters of "a": 92 s). A match at a position
    after a path character, or after "x/", means one a character or "x/" earlier, so after a
    failed try the next that can match is the next start of a run (_NODE_START)."""
    pos = 0
    while pos < len(text):
        m = _NODE_ID.match(text, pos)
        if m:
            yield m
            pos = m.end()
        elif text[pos] == "/":  # "x/" before pos+1 may be a match's end, not a failed try
            pos += 1
        else:
            start = _NODE_START.search(text, pos + 1)
            if start is None:
                return
            pos = start.start()


def _paths(text: str) -> Iterator[re.Match[str]]:
    """_PATH.finditer(text), in linear time. finditer tried each segment of "a/a/a/..." to the
    chain's end (8,000 characters: 1 s). A match at a segment of a chain means one at the
    chain's start (its segments go first), so when that start fails, the rest of the chain is
    skipped, but for a last letter before ":" (a drive, "a/C:/x.py")."""
    pos = 0
    while (start := _PATH_START.search(text, pos)) is not None:
        s = start.start()
        m = _PATH.match(text, s)
        if m:
            yield m
            pos = m.end()
            continue
        pos = s + 1
        if text[s] != "/" and text[s + 1:s + 2] != ":":
            end = _PATH_CHAIN.match(text, s).end()  # type: ignore[union-attr]
            drive = text[end:end + 1] == ":" and end - 2 > s and text[end - 2] == "/"
            pos = max(pos, end - 1 if drive else end)


def find_mentions(texts: Sequence[str], resolver: PathResolver) -> list[Mention]:
    """Files named in `texts` (oldest first), most recently mentioned first."""
    found: dict[str, Mention] = {}
    resolved: dict[str, list[str]] = {}
    modules: dict[str, list[str]] = {}

    def resolve(raw: str) -> list[str]:
        if raw not in resolved:
            resolved[raw] = resolver.resolve(raw)
        return resolved[raw]

    for index, text in enumerate(texts):
        if len(text) > 2 * _SCAN_CHARS:
            text = text[:_SCAN_CHARS] + "\n" + text[-_SCAN_CHARS:]
        # Later texts and later positions within a text are more recent mentions.
        base = (index + 1) * 10 * _SCAN_CHARS

        def note(raw_paths: list[str], pos: int, line: int | None, name: str | None, base: int = base) -> None:
            for path in raw_paths:
                found.setdefault(path, Mention(path)).add(base + pos, line, name)

        for m in _PY_FRAME.finditer(text):
            func = m.group(3)
            note(resolve(m.group(1)), m.start(), int(m.group(2)), func if func and func[0] != "<" else None)
        for m in _node_ids(text):
            name = m.group(2).rsplit("::", 1)[-1].split("[", 1)[0]
            note(resolve(m.group(1)), m.start(), None, name)
        for m in _paths(text):
            line = int(m.group(2)) if m.group(2) else None
            note(resolve(m.group(1)), m.start(), line, None)
        for m in _MODULE.finditer(text):
            dotted = m.group(1)
            if dotted not in modules:
                modules[dotted] = resolver.resolve_module(dotted)
            note(modules[dotted], m.start(), None, None)
    return sorted(found.values(), key=lambda mention: (-mention.order, mention.path))


def unresolved_paths(texts: Sequence[str], resolver: PathResolver, limit: int = 5) -> list[str]:
    """Path-looking mentions with a directory that match no file (for the notes)."""
    out: list[str] = []
    for text in reversed(texts):
        for m in _paths(text):
            raw = m.group(1)
            if "/" in raw.strip("/") and not _FOREIGN.search(raw) and not raw.startswith(("http", "//")) \
                    and not resolver.resolve(raw) and raw not in out:
                out.append(raw)
                if len(out) >= limit:
                    return out
    return out


# --- the query -----------------------------------------------------------------------------

_QUERY_CLIP = 3000  # characters of each end of one long text (a pasted log): its gist, bounded


def _clip(text: str) -> str:
    if len(text) <= 2 * _QUERY_CLIP:
        return text
    return text[:_QUERY_CLIP] + "\n" + text[-_QUERY_CLIP:]


# Words that say what kind of change a card asks for, not what it is about: "Fix", "Update",
# "Add", "Remove" open most titles, and in a file's name (`docs/updates.rst`, `release.py`'s
# neighbours) or text they pull in files the card is not about. Weighed down, not dropped:
# "remove" may still be the word that tells two passages apart.
_CHANGE_VERBS: frozenset[str] = frozenset(term_counts(
    "fix fixes fixed update updated add added remove removed bump change improve use make "
    "allow support move cleanup clean refactor rename replace drop upgrade"))
CHANGE_VERB_WEIGHT = 0.25
# A link's scheme and host say where it points, not what the card is about: "https", "www" and
# "com" match every file with a URL in it, and "github" the `.github/` workflows by name. The
# path after the host stays (`/psf/requests/pull/6421`, a blob link's file).
_URL_HOST = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s]*")


def card_query(card: Card, latest_messages: int = 3) -> dict[str, float]:
    """Weighted query terms of a card: the title counts double, the body once, and the latest
    turn (its last few messages) with the newest message weighing most: what the card is
    about now, more than what it was about three messages ago. Change verbs ("fix", "update")
    count a quarter; links count without their scheme and host."""
    parts: list[tuple[str, float]] = [(card.title, 2.0), (_clip(card.body), 1.0)]
    recent = card.history[-latest_messages:] if latest_messages > 0 else ()
    texts = card_texts(card.model_copy(update={"history": recent}))[1:]
    for age, text in enumerate(reversed(texts)):
        parts.append((_clip(text), 1.5 * 0.7**age))
    query = merge_queries(*((_URL_HOST.sub(" ", text), weight) for text, weight in parts))
    for term in _CHANGE_VERBS & query.keys():
        query[term] *= CHANGE_VERB_WEIGHT
    return query


@dataclass(frozen=True)
class Choice:
    """A chosen source file: named by the card (`mention`) or ranked (`score`)."""

    path: str
    mention: Mention | None = None
    score: float | None = None


def choose_files(
    card: Card,
    index: BM25Index,
    resolver: PathResolver,
    *,
    max_files: int,
    query: Mapping[str, float] | None = None,
    exclude: Set[str] = frozenset(),
    boosts: Mapping[str, float] | None = None,
    latest_messages: int = 3,
) -> tuple[list[Choice], list[Mention]]:
    """The source files for a card, in rank order, and every file it names.

    Named files come first, most recently named first; a named file of vendored or generated
    code (a traceback passing through a library) after the card's own. The rest of the
    `max_files` are the index's best matches for the card's title, body and latest turn.
    """
    mentions = [m for m in find_mentions(card_texts(card), resolver) if m.path not in exclude]
    mentions.sort(key=lambda m: not indexable(m.path))  # stable: recency order within each group
    chosen = [Choice(m.path, mention=m) for m in mentions[:max_files]]
    if query is None:
        query = card_query(card, latest_messages)
    if len(chosen) < max_files and query:
        taken = {c.path for c in chosen} | set(exclude)
        for path, score in index.rank(query, max_files - len(chosen), boosts=boosts, exclude=taken):
            chosen.append(Choice(path, score=score))
    return chosen, mentions

