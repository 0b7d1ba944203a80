"""Repository context: ADRs, library docs and the source files a card is about.

The card's repository and branch are checked out shallowly into a cache on the worker
(`<cache_dir>/<owner>/<name>`): the first call clones (`git clone --depth N --branch B`), later
calls fetch the branch (`git fetch --depth N origin B`) and force-check-out `FETCH_HEAD`. One
cache directory serves every branch of a repository, so everything that reads the working tree
(checkout, indexing, reading the chosen files) runs under an exclusive `flock` on
`<owner>/<name>.lock`: two activities on one worker, or two worker processes sharing a volume,
never see a tree that another is switching underneath them.

What a card gets, in this order (the prompt core keeps equal priorities in this order):

- source files: first the files the card names - in its title, body, notes and chat history,
  including Python traceback frames (`File "/app/app/webhooks/retry.py", line 42`), pytest node
  ids (`tests/test_retry.py::test_backoff`), `path:line` of other languages' traces, GitHub blob
  links and dotted module paths (`app.webhooks.retry`) - most recently mentioned first, resolved
  against the checkout's files (absolute container paths by their longest matching suffix);
  then the files ranked highest for the card's title, body and latest turn (BM25 over 60-line
  passages plus a path and name score, see ranking.py), boosting the files the card's branch
  changed since it left the default branch (`git diff --name-only <merge-base> HEAD`; the
  default branch is fetched as shallowly as the card's, once per branch head). A file that
  does not fit `max_file_tokens` is excerpted: its head, the lines around the mentioned line
  numbers and around the lines that match the card best, with line numbers ("  42 | code")
  and markers that say how many lines were cut.
- ADRs (`adr_globs`), highest-numbered / newest first, superseded ones last.
- library docs: dependency manifests with their version constraints (pyproject.toml,
  requirements*.txt, package.json, go.mod, Cargo.toml, Gemfile), root first, and the docs the
  repository keeps about its libraries (`doc_globs`), the most relevant to the card first.

The card's own notes are already in the prompt, so this source does not repeat them.

Secrets: a token is never on a command line (other users can read `ps`), never in the clone's
`.git/config` and never in an error: git receives it through `GIT_CONFIG_*` environment
variables as a `url.<https://x-access-token:TOKEN@host/>.insteadOf <https://host/>` rewrite, a
credential helper configured on the worker is switched off (it could store the token), and
git's output is scrubbed of the token before it becomes an error message.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, urlsplit

from cardloop.integrations.sources.base import SourceRequest, SourceResult, SourceUnavailable
from cardloop.integrations.sources.ranking import (
    BM25Index,
    IndexCache,
    merge_queries,
    term_counts,
)
from cardloop.prompts.card import Card, ContextItem, ContextKind
from cardloop.prompts.logs import excerpt_text

Count = Callable[[str], int]

DEFAULT_CLONE_URL_TEMPLATE = "https://github.com/{repo}.git"
DEFAULT_ADR_GLOBS: tuple[str, ...] = ("docs/adr/**/*.md", "doc/architecture/decisions/**/*.md")
DEFAULT_DOC_GLOBS: tuple[str, ...] = ("docs/vendor/**/*.md", "docs/libraries/**/*.md")

MANIFEST_NAMES: frozenset[str] = frozenset(
    {"pyproject.toml", "package.json", "go.mod", "Cargo.toml", "Gemfile", "setup.cfg", "Pipfile"}
)
_REQUIREMENTS = re.compile(r"^requirements[\w.-]*\.(?:txt|in)\Z")

# Directories whose files are someone else's code or build output: never ranked.
SKIP_DIRS: frozenset[str] = frozenset({
    ".git", "node_modules", ".venv", "venv", "dist", "build", "vendor", "third_party",
    "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages",
    ".next", ".nuxt", "coverage", "htmlcov", "bower_components", ".gradle", ".idea", ".terraform",
})
LOCK_FILES: frozenset[str] = frozenset({
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Pipfile.lock", "Cargo.lock",
    "Gemfile.lock", "go.sum", "composer.lock", "uv.lock", "pdm.lock", "bun.lockb", "flake.lock",
})
# Generated, minified or binary by name; content is checked for NUL bytes as well.
SKIP_SUFFIXES: tuple[str, ...] = (
    ".min.js", ".min.css", ".map", ".lock", ".pyc", ".pyo", ".so", ".dylib", ".dll", ".exe", ".o", ".a",
    ".class", ".jar", ".war", ".whl", ".egg", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".tar", ".rar",
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".svg", ".pdf", ".psd", ".mp3", ".mp4",
    ".wav", ".ogg", ".mov", ".avi", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".bin", ".dat", ".db",
    ".sqlite", ".sqlite3", ".parquet", ".npy", ".pkl", ".pb", ".onnx", ".pt", ".ckpt", ".h5",
)
_GENERATED = re.compile(r"(?:^|/)[^/]*(?:_pb2(?:_grpc)?\.py|\.pb\.go|\.generated\.\w+|\.g\.dart)\Z")

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_SAFE_BRANCH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+@-]*\Z")
_SHORT_SHA = 12


def indexable(path: str) -> bool:
    """Whether a tracked file may be ranked at all: not vendored, generated, a lock file or
    binary by its name. Size and content are checked when it is read."""
    parts = path.split("/")
    if any(part in SKIP_DIRS for part in parts[:-1]):
        return False
    name = parts[-1]
    if name in LOCK_FILES:
        return False
    lowered = name.lower()
    return not (lowered.endswith(SKIP_SUFFIXES) or _GENERATED.search(path))


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary (a NUL byte early on, as git judges)."""
    if b"\0" in data[:8000]:
        return None
    return data.decode("utf-8", errors="replace")


def is_manifest(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in MANIFEST_NAMES or bool(_REQUIREMENTS.match(name))


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A repository-relative glob as a regex: `**/` is any number of directories (none
    included), `*` and `?` stay within one path component."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _split_lines(text: str) -> list[str]:
    # "\n" only, as in prompts/logs.py: line numbers must agree with editors and tracebacks.
    return (text[:-1] if text.endswith("\n") else text).split("\n")


# --- mentioned files -----------------------------------------------------------------------

# `File "/app/app/webhooks/retry.py", line 42, in compute_backoff`
_PY_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([\w<>.]+))?')
# `tests/test_retry.py::test_backoff[slow]` or `tests/test_retry.py::TestRetry::test_backoff`
_NODE_ID = re.compile(r"((?:[\w.@+-]+/)*[\w.@+-]+\.py)((?:::[\w.-]+)+)")
# A path with an extension, optionally followed by a line: `a/b.go:42`, `a/b.ts(42,7)`, `#L42`.
_PATH = re.compile(
    r"(?<![\w@.+-])((?:[A-Za-z]:)?/?(?:[\w@.+-]+/)*[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,9})"
    r"(?:(?::|#L|\(|\", line )(\d{1,7}))?"
)
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
        for m in _NODE_ID.finditer(text):
            name = m.group(2).rsplit("::", 1)[-1].split("[", 1)[0]
            note(resolve(m.group(1)), m.start(), None, name)
        for m in _PATH.finditer(text):
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
        for m in _PATH.finditer(text):
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


def card_query(card: Card, latest_messages: int = 3) -> dict[str, float]:
    """Weighted query terms of a card: the title counts double, the body once, and the latest
    turn (its last few messages) with the newest message weighing most: what the card is
    about now, more than what it was about three messages ago."""
    parts: list[tuple[str, float]] = [(card.title, 2.0), (_clip(card.body), 1.0)]
    recent = card.history[-latest_messages:] if latest_messages > 0 else ()
    texts = card_texts(card.model_copy(update={"history": recent}))[1:]
    for age, text in enumerate(reversed(texts)):
        parts.append((_clip(text), 1.5 * 0.7**age))
    return merge_queries(*parts)


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


# --- rendering files with line numbers -------------------------------------------------------

_DEF_LINE = re.compile(r"^\s*(?:async\s+def|def|class|func|function|fn|pub\s+fn|public|private|protected)\b")
_HEAD_LINES = 12
_OBVIOUSLY_OVER_CHARS = 8  # no text averages more characters per token than this


def _marker(n: int) -> str:
    return f"[... {n:,} line{'' if n == 1 else 's'} cut ...]"


def number_lines(lines: Sequence[str], start: int = 0, end: int | None = None, width: int = 4) -> list[str]:
    end = len(lines) if end is None else end
    return [f"{i + 1:>{width}} | {lines[i]}" for i in range(start, end)]


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _render(lines: Sequence[str], kept: list[tuple[int, int]], width: int) -> str:
    parts: list[str] = []
    pos = 0
    for a, b in kept:
        if a > pos:
            parts.append(_marker(a - pos))
        parts.extend(number_lines(lines, a, b, width))
        pos = b
    if pos < len(lines):
        parts.append(_marker(len(lines) - pos))
    return "\n".join(parts)


def _definition_line(lines: Sequence[str], name: str) -> int | None:
    pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class|func|function|fn)\s+(?:\([^)]*\)\s*)?{re.escape(name)}\b")
    for i, line in enumerate(lines):
        if pattern.search(line):
            return i
    return None


def render_file(
    text: str,
    max_tokens: int,
    count: Count,
    *,
    lines_of_interest: Sequence[int] = (),
    names: Sequence[str] = (),
    query: Mapping[str, float] | None = None,
    idf: Callable[[str], float] | None = None,
) -> tuple[str, bool]:
    """The file with line numbers, or, when that does not fit `max_tokens`, an excerpt: the
    head (imports, module docstring), the lines around `lines_of_interest` (1-based, from
    the card) and around the definitions of `names`, then around the lines matching `query`
    best, each window as large as the budget allows. Returns (text, excerpted)."""
    lines = _split_lines(text)
    n = len(lines)
    width = max(4, len(str(n)))
    if len(text) <= max_tokens * _OBVIOUSLY_OVER_CHARS:
        full = "\n".join(number_lines(lines, width=width))
        if count(full) <= max_tokens:
            return full, False

    # Windows in priority order: (first line, end line, focus line), 0-based, end exclusive.
    windows: list[tuple[int, int, int]] = []
    anchors = [ln - 1 for ln in lines_of_interest if 0 < ln <= n]
    anchors += [d for d in (_definition_line(lines, name) for name in names) if d is not None]
    for a in anchors:
        start = a - 10
        # Start at the enclosing definition when it is near: the function the line is in.
        for j in range(a, max(-1, a - 30), -1):
            if _DEF_LINE.match(lines[j]):
                start = j
                break
        windows.append((max(0, start), min(n, a + 9), a))
    if query:
        weight = idf or (lambda _t: 1.0)
        scored: list[tuple[float, int]] = []
        for i, line in enumerate(lines):
            terms = term_counts(line)
            s = sum(query.get(t, 0.0) * weight(t) for t in terms)
            if s > 0:
                scored.append((s * (1.5 if _DEF_LINE.match(line) else 1.0), i))
        scored.sort(key=lambda si: (-si[0], si[1]))
        windows += [(max(0, i - 4), min(n, i + 6), i) for _, i in scored[:40]]

    # Estimate tokens per line from a sample, select by estimate, then verify by counting.
    sample = "\n".join(number_lines(lines, 0, min(n, 200), width))
    ratio = max(1.0, len(sample) / max(1, count(sample)))
    cost = [(len(line) + width + 4) / ratio + 1 for line in lines]
    marker_cost = 10.0

    def select(target: float) -> list[tuple[int, int]]:
        keep = bytearray(n)
        used = marker_cost  # the marker after the last kept range

        def add(lo: int, hi: int, marker: bool = True) -> bool:
            nonlocal used
            extra = sum(cost[i] for i in range(lo, hi) if not keep[i]) + (marker_cost if marker else 0.0)
            if used + extra > target:
                return False
            keep[lo:hi] = b"\1" * (hi - lo)
            used += extra
            return True

        head = min(n, _HEAD_LINES)
        while head and not add(0, head):
            head //= 2
        placed: list[tuple[int, int]] = [(0, head)] if head else []
        for a, b, focus in windows:
            # A window that does not fit whole is tried narrower around its focus line.
            for lo, hi in ((a, b), (max(a, focus - 6), min(b, focus + 4)), (max(a, focus - 2), min(b, focus + 2)),
                           (focus, focus + 1)):
                if add(lo, hi):
                    placed.append((lo, hi))
                    break
        # Room left: widen what was placed, the most important first, a few lines at a time.
        grew = True
        while grew:
            grew = False
            for i, (lo, hi) in enumerate(placed):
                nlo, nhi = max(0, lo - 2), min(n, hi + 2)
                if (nlo, nhi) != (lo, hi) and add(nlo, nhi, marker=False):
                    placed[i] = (nlo, nhi)
                    grew = True
        ranges: list[tuple[int, int]] = []
        i = 0
        while i < n:
            if keep[i]:
                j = i
                while j < n and keep[j]:
                    j += 1
                ranges.append((i, j))
                i = j
            else:
                i += 1
        return ranges

    target = float(max_tokens)
    for _ in range(6):
        kept = select(target * 0.95)
        if kept:
            out = _render(lines, kept, width)
            if count(out) <= max_tokens:
                return out, True
        target *= 0.85
    # Not even a few lines fit: cut the numbered text by characters.
    return excerpt_text("\n".join(number_lines(lines, 0, min(n, 50), width)), max_tokens, count).text, True


# --- git -------------------------------------------------------------------------------------


class _Revealable(Protocol):
    def reveal(self) -> str: ...


@dataclass(frozen=True)
class Checkout:
    repo: str
    branch: str | None
    path: Path
    sha: str
    committed_at: datetime | None

    @property
    def short(self) -> str:
        return self.sha[:_SHORT_SHA]


class _GitFailed(Exception):
    def __init__(self, command: str, detail: str, *, timed_out: bool = False) -> None:
        super().__init__(f"git {command}: {detail}")
        self.command = command
        self.detail = detail
        self.timed_out = timed_out


_MISSING_BRANCH = re.compile(
    r"Remote branch .* not found|couldn't find remote ref|could not find remote branch", re.IGNORECASE
)
_PERMANENT = re.compile(
    r"repository '?.*'? not found|returned error: (?:400|401|403|404|410|422)|authentication failed|"
    r"could not read (?:username|password)|terminal prompts disabled|does not appear to be a git repository|"
    r"invalid username or password|permission denied|not a valid repository name|"
    r"protocol '?[\w+-]*'? is not supported|unable to find remote helper|access denied",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"could not resolve host|failed to connect|connection (?:refused|reset|timed out)|timed out|"
    r"early eof|remote end hung up|returned error: (?:408|429|5\d\d)|ssl|tls|gnutls|"
    r"temporary failure|network is unreachable|transfer closed|rpc failed|operation too slow",
    re.IGNORECASE,
)


class RepositorySource:
    """Context from the card's repository: see the module docstring.

    Sync: `gather` runs git and reads files; run it in an activity thread, not on an event loop.
    """

    name = "repository"

    def __init__(
        self,
        cache_dir: str | Path,
        *,
        clone_url_template: str = DEFAULT_CLONE_URL_TEMPLATE,
        token: str | _Revealable | None = None,
        depth: int = 50,
        adr_globs: Sequence[str] = DEFAULT_ADR_GLOBS,
        doc_globs: Sequence[str] = DEFAULT_DOC_GLOBS,
        max_files: int = 8,
        max_file_tokens: int = 2500,
        max_adrs: int = 3,
        max_docs: int = 4,
        max_manifests: int = 4,
        max_file_bytes: int = 256_000,
        max_index_files: int = 20_000,
        base_branch: str | None = None,
        branch_boost: float = 1.5,
        max_branch_files: int = 100,
        latest_messages: int = 3,
        git_timeout: float = 120.0,
        lock_timeout: float = 300.0,
        counter: Count | None = None,
        git: str = "git",
        index_cache_size: int = 4,
    ) -> None:
        if "{repo}" not in clone_url_template:
            raise ValueError("clone_url_template must contain {repo}")
        if depth < 1 or max_files < 0 or max_file_tokens < 1 or max_adrs < 0:
            raise ValueError("depth and max_file_tokens must be >= 1, max_files and max_adrs >= 0")
        self.cache_dir = Path(cache_dir).expanduser()
        self.clone_url_template = clone_url_template
        self._token = token
        self.depth = depth
        self.adr_globs = tuple(adr_globs)
        self.doc_globs = tuple(doc_globs)
        self.max_files = max_files
        self.max_file_tokens = max_file_tokens
        self.max_adrs = max_adrs
        self.max_docs = max_docs
        self.max_manifests = max_manifests
        self.max_file_bytes = max_file_bytes
        self.max_index_files = max_index_files
        self.base_branch = base_branch
        self.branch_boost = branch_boost
        self.max_branch_files = max_branch_files
        self.latest_messages = latest_messages
        self.git_timeout = git_timeout
        self.lock_timeout = lock_timeout
        self.git = git
        if counter is None:
            from cardloop.prompts.tokens import TokenCounter  # loads the vocabulary: only when needed

            counter = TokenCounter("cl100k_base").count
        # Gathers for different repositories run in parallel threads, and a TokenCounter's LRU
        # cache is not thread-safe; counting holds the GIL anyway, so a lock costs little.
        count_lock = threading.Lock()

        def count(text: str) -> int:
            with count_lock:
                return counter(text)

        self.count: Count = count
        self._adr_res = [glob_regex(g) for g in self.adr_globs]
        self._doc_res = [glob_regex(g) for g in self.doc_globs]
        self._snapshots: IndexCache[tuple[str, str], _Snapshot] = IndexCache(index_cache_size)
        self._branch_diffs: IndexCache[tuple[str, str, str], tuple[tuple[str, ...], str]] = IndexCache(64)

    def __repr__(self) -> str:
        # Never the token: this object may end up in a log line or a traceback.
        token = "set" if self._token else "none"
        return f"RepositorySource(cache_dir={str(self.cache_dir)!r}, url={self.clone_url_template!r}, token={token})"

    # --- public entry points ---------------------------------------------------------------

    def gather(self, request: SourceRequest) -> SourceResult:
        card = request.card
        if not card.repo:
            return SourceResult(self.name, notes=("the card names no repository: no repository context",))
        owner, name = self._split_repo(card.repo)
        branch = self._check_branch(card.branch, card.repo)
        with self._locked(owner, name):
            checkout = self._checkout(card.repo, branch)
            return self._gather_locked(card, checkout)

    def checkout(self, repo: str, branch: str | None) -> Checkout:
        """Clone or update the cached checkout of `repo` at `branch` (None: the default branch)."""
        owner, name = self._split_repo(repo)
        branch = self._check_branch(branch, repo)
        with self._locked(owner, name):
            return self._checkout(repo, branch)

    # --- selection -------------------------------------------------------------------------

    def _gather_locked(self, card: Card, co: Checkout) -> SourceResult:
        snap = self._snapshots.get_or_build((co.repo, co.sha), lambda: self._snapshot(co))
        notes = [
            f"checked out {co.repo}@{co.branch or '(default branch)'} at {co.short}: "
            f"{len(snap.files):,} files tracked, {len(snap.index):,} ranked"
            + (f" (index limited to {self.max_index_files:,} files)" if snap.truncated else "")
        ]
        adrs = self._adr_paths(snap)
        manifests = sorted((p for p in snap.files if is_manifest(p) and indexable(p)),
                           key=lambda p: (p.count("/"), p))[: self.max_manifests]
        docs_all = [p for p in snap.files if any(r.match(p) for r in self._doc_res)]
        not_source = set(adrs) | set(manifests) | set(docs_all)

        query = card_query(card, self.latest_messages)
        items: list[ContextItem] = []
        texts = card_texts(card)
        changed: tuple[str, ...] = ()
        if co.branch and self.branch_boost != 1.0:
            changed, why = self._branch_diffs.get_or_build(
                (co.repo, co.sha, co.branch), lambda: self._branch_changes(co))
            notes.append(why)
        # A few spare candidates stand in for chosen files that turn out binary or too large.
        chosen, mentions = choose_files(
            card, snap.index, snap.resolver, max_files=self.max_files + 3, query=query, exclude=not_source,
            boosts=dict.fromkeys(changed, self.branch_boost) if changed else None,
        )
        if mentions:
            shown = ", ".join(m.path + (f" (line {m.lines[0]})" if m.lines else "") for m in mentions[:10])
            notes.append(f"named in the card: {shown}")
        missing = unresolved_paths(texts, snap.resolver)
        if missing:
            notes.append(f"named in the card but not in the repository: {', '.join(missing)}")

        ranked: list[str] = []
        excerpted: list[str] = []
        for choice in chosen:
            if len(items) >= self.max_files:
                break
            path, mention = choice.path, choice.mention
            # A file the card names may be long (a generated module a traceback ran through):
            # it is excerpted around the named lines, so it may be larger than a ranked one.
            text = self._read(co, path, limit=self.max_file_bytes * (8 if mention else 1))
            if text is None:
                notes.append(f"skipped {path}: binary or too large")
                continue
            content, cut = render_file(
                text,
                self.max_file_tokens,
                self.count,
                lines_of_interest=mention.lines if mention else (),
                names=mention.names if mention else (),
                query=query,
                idf=snap.index.idf,
            )
            items.append(self._item(ContextKind.SOURCE_FILE, co, path, content))
            if choice.score is not None:
                ranked.append(f"{path} ({choice.score:.1f})")
            if cut:
                excerpted.append(path)
        if ranked:
            notes.append("ranked for the card: " + ", ".join(ranked))
        if excerpted:
            notes.append(f"excerpted to {self.max_file_tokens:,} tokens: " + ", ".join(excerpted))

        for path in adrs[: self.max_adrs]:
            text = self._read(co, path)
            if text is not None:
                items.append(self._item(ContextKind.ADR, co, path, self._fit(text)))
        if adrs:
            notes.append(f"ADRs: {min(len(adrs), self.max_adrs)} of {len(adrs)}, highest-numbered first")

        library: list[str] = list(manifests)
        if docs_all and self.max_docs:
            if len(docs_all) > self.max_docs:
                doc_index = BM25Index((p, self._read(co, p) or "") for p in docs_all)
                best = [p for p, _ in doc_index.rank(query, self.max_docs)] if query else []
                docs_all = best + [p for p in sorted(docs_all) if p not in best]
            library += docs_all[: self.max_docs]
        for path in library:
            text = self._read(co, path)
            if text is not None:
                items.append(self._item(ContextKind.LIBRARY_DOC, co, path, self._fit(text)))
        if library:
            notes.append("library docs: " + ", ".join(library))
        return SourceResult(self.name, items=tuple(items), notes=tuple(notes))

    def _item(self, kind: ContextKind, co: Checkout, path: str, content: str) -> ContextItem:
        source = f"{co.repo}@{co.short}:{path}"
        if len(source) > 500:  # ContextItem's limit; a pathological path keeps its end
            source = source[:240] + "..." + source[-257:]
        return ContextItem(kind=kind, source=source, title=path[-500:], content=content, created_at=co.committed_at)

    def _fit(self, text: str) -> str:
        return excerpt_text(text, self.max_file_tokens, self.count).text

    def _adr_paths(self, snap: _Snapshot) -> list[str]:
        """ADR paths, superseded ones last; numbered ones highest number first, dated ones
        (2024-05-01-title.md) newest first, others by path."""

        def key(path: str) -> tuple[bool, int, int, str]:
            name = path.rsplit("/", 1)[-1]
            date = re.match(r"(\d{4})-(\d\d)-(\d\d)", name)
            if date:
                return (path in snap.superseded, 1, -int("".join(date.groups())), path)
            number = re.match(r"(?:adr[-_]?)?(\d+)", name, re.IGNORECASE)
            if number:
                return (path in snap.superseded, 0, -int(number.group(1)), path)
            return (path in snap.superseded, 2, 0, path)

        return sorted((p for p in snap.files if any(r.match(p) for r in self._adr_res)), key=key)

    # --- snapshot: files, index; changes on the branch ---------------------------------------------

    def _snapshot(self, co: Checkout) -> _Snapshot:
        out = self._run(["ls-files", "-z"], co.path)
        files = [p for p in out.split("\0") if p]
        candidates = [p for p in files if indexable(p)]
        truncated = len(candidates) > self.max_index_files
        if truncated:
            # Shallow paths first: top-level code says more about a repository than deep fixtures.
            candidates = sorted(candidates, key=lambda p: (p.count("/"), p))[: self.max_index_files]
        docs = ((p, text) for p in candidates if (text := self._read(co, p)) is not None)
        index = BM25Index(docs)
        superseded = set()
        for p in files:
            if any(r.match(p) for r in self._adr_res):
                head = (self._read(co, p) or "")[:2000]
                if re.search(r"^\W*status\W*:?\W*(?:superseded|deprecated|rejected)", head, re.I | re.M):
                    superseded.add(p)
        return _Snapshot(
            files=tuple(files),
            index=index,
            resolver=PathResolver(files),
            superseded=frozenset(superseded),
            truncated=truncated,
        )

    def _branch_changes(self, co: Checkout) -> tuple[tuple[str, ...], str]:
        """Files the branch changed since it left the base branch, and a note saying so.

        A shallow single-branch clone has no merge base, so the base branch (`base_branch`,
        else the remote's default) is fetched as shallowly as the branch. When the branch left
        it longer ago than that depth there is no merge base and no boost: deepening both
        histories for a ranking hint is not worth the transfer.
        """
        if not co.branch:
            return (), "the default branch: no branch changes to boost"
        try:
            base = self.base_branch or self._default_branch(co)
            if not base or base == co.branch:
                return (), f"{co.branch} is the base branch: no branch changes to boost"
            if not _SAFE_BRANCH.match(base) or ".." in base:
                return (), f"base branch {base!r} is not a usable name"
            ref = f"refs/remotes/origin/{base}"
            self._run(["fetch", "--depth", str(self.depth), "--no-tags", "--quiet", "origin",
                       f"+refs/heads/{base}:{ref}"], co.path)
            merge_base = self._run(["merge-base", "HEAD", ref], co.path).strip()
            out = self._run(["diff", "--name-only", "--no-renames", "-z", merge_base, "HEAD"], co.path)
        except _GitFailed as exc:
            return (), f"no merge base with the base branch within depth {self.depth} ({exc.command} failed)"
        files = tuple(p for p in out.split("\0") if p)
        if len(files) > self.max_branch_files:
            return (), f"{co.branch} changed {len(files):,} files since {base}: too many to boost"
        shown = ", ".join(files[:10]) + (" ..." if len(files) > 10 else "")
        return files, f"changed on {co.branch} since {base} (boosted): {shown or 'nothing'}"

    def _default_branch(self, co: Checkout) -> str | None:
        out = self._run(["ls-remote", "--symref", "origin", "HEAD"], co.path)
        match = re.search(r"^ref: refs/heads/(\S+)\tHEAD$", out, re.MULTILINE)
        return match.group(1) if match else None

    def _read(self, co: Checkout, path: str, limit: int | None = None) -> str | None:
        full = co.path / path
        try:
            if full.is_symlink() or not full.is_file():
                return None  # a symlink could point outside the checkout
            if full.stat().st_size > (limit or self.max_file_bytes):
                return None
            return decode_text(full.read_bytes())
        except OSError:
            return None

    # --- checkout ----------------------------------------------------------------------------

    @staticmethod
    def _split_repo(repo: str) -> tuple[str, str]:
        owner, _, name = repo.partition("/")
        # ".." would escape the cache directory; the card pattern allows dots.
        if not (_SAFE_NAME.match(owner) and _SAFE_NAME.match(name)) or ".." in repo:
            raise SourceUnavailable(f"invalid repository name {repo!r}", retryable=False)
        return owner, name

    @staticmethod
    def _check_branch(branch: str | None, repo: str) -> str | None:
        if branch is None:
            return None
        # A branch from a board is untrusted: "--upload-pack=..." must never reach git as an option.
        if not _SAFE_BRANCH.match(branch) or ".." in branch or "//" in branch or branch.endswith((".lock", "/", ".")):
            raise SourceUnavailable(f"invalid branch name {branch!r} for {repo}", retryable=False)
        return branch

    @contextmanager
    def _locked(self, owner: str, name: str) -> Iterator[None]:
        (self.cache_dir / owner).mkdir(parents=True, exist_ok=True)
        lock_path = self.cache_dir / owner / f"{name}.lock"
        # One open file description per acquisition: flock then excludes threads of this
        # process as well as other processes sharing the cache directory.
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise SourceUnavailable(
                            f"checkout of {owner}/{name} is busy (lock held over {self.lock_timeout:.0f}s)",
                            retryable=True,
                        ) from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _checkout(self, repo: str, branch: str | None) -> Checkout:
        owner, name = self._split_repo(repo)
        dest = self.cache_dir / owner / name
        url = self.clone_url_template.format(repo=repo)
        ref = branch or "HEAD"
        what = f"branch {branch}" if branch else "the default branch"
        try:
            if (dest / ".git").is_dir():
                try:
                    self._run(["remote", "set-url", "origin", url], dest)
                    self._run(["fetch", "--depth", str(self.depth), "--no-tags", "--quiet", "origin", ref], dest)
                    self._run(["checkout", "--force", "--quiet", "FETCH_HEAD"], dest)
                except _GitFailed as exc:
                    if exc.timed_out or _MISSING_BRANCH.search(exc.detail) or _PERMANENT.search(exc.detail) \
                            or _TRANSIENT.search(exc.detail):
                        raise
                    # Anything else is the cache's own trouble (a stale index.lock after a
                    # crash, a corrupt object): start over from a fresh clone.
                    shutil.rmtree(dest, ignore_errors=True)
                    self._clone(url, branch, dest)
            else:
                self._clone(url, branch, dest)
            head = self._run(["log", "-1", "--format=%H %cI", "HEAD"], dest).split()
        except _GitFailed as exc:
            raise self._unavailable(exc, repo, what) from None
        committed_at = None
        if len(head) > 1:
            try:
                committed_at = datetime.fromisoformat(head[1])
            except ValueError:
                committed_at = None
        return Checkout(repo=repo, branch=branch, path=dest, sha=head[0], committed_at=committed_at)

    def _clone(self, url: str, branch: str | None, dest: Path) -> None:
        if dest.exists():
            shutil.rmtree(dest)  # a partial clone left by a crash or a timeout
        args = ["clone", "--depth", str(self.depth), "--no-tags", "--quiet"]
        if branch:
            args += ["--branch", branch]
        try:
            self._run([*args, "--", url, str(dest)], dest.parent)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise

    def _unavailable(self, exc: _GitFailed, repo: str, what: str) -> SourceUnavailable:
        detail = exc.detail
        if exc.timed_out:
            return SourceUnavailable(f"git {exc.command} of {repo} timed out after {self.git_timeout:.0f}s")
        if _MISSING_BRANCH.search(detail):
            return SourceUnavailable(f"{what} not found in {repo}", retryable=False)
        if _PERMANENT.search(detail) and not _TRANSIENT.search(detail):
            return SourceUnavailable(f"git {exc.command} of {repo} failed: {detail}", retryable=False)
        return SourceUnavailable(f"git {exc.command} of {repo} failed: {detail}", retryable=True)

    # --- running git -------------------------------------------------------------------------

    def _token_value(self) -> str | None:
        token = self._token
        if token is None:
            return None
        value = token if isinstance(token, str) else token.reveal()
        return value or None

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("GIT_ASKPASS", "SSH_ASKPASS", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")
               and not k.startswith("GIT_CONFIG_")}
        env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANG="C")
        config = [
            ("credential.helper", ""),      # a helper could store the token on the worker's disk
            ("http.lowSpeedLimit", "1000"),  # a stalled transfer fails instead of hanging
            ("http.lowSpeedTime", "30"),
            ("protocol.ext.allow", "never"),
            ("core.hooksPath", os.devnull),  # the repository's hooks never run here
        ]
        token = self._token_value()
        url = self.clone_url_template
        parts = urlsplit(url)
        if token and parts.scheme in ("https", "http") and "@" not in parts.netloc:
            base = f"{parts.scheme}://{parts.netloc}/"
            authed = f"{parts.scheme}://x-access-token:{quote(token, safe='')}@{parts.netloc}/"
            config.append((f"url.{authed}.insteadOf", base))
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        return env

    def _scrub(self, text: str) -> str:
        token = self._token_value()
        if token:
            for secret in {token, quote(token, safe=""), quote(token),
                           base64.b64encode(f"x-access-token:{token}".encode()).decode()}:
                text = text.replace(secret, "***")
        # Any credentials in a URL, whoever put them there.
        return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s'\"]+@", r"\1***@", text)

    def _run(self, args: list[str], cwd: Path) -> str:
        command = next((a for a in args if not a.startswith("-") and "=" not in a), args[0])
        try:
            proc = subprocess.Popen(
                [self.git, *args],
                cwd=cwd,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a timeout kills git's helpers (git-remote-https) too
            )
        except FileNotFoundError:
            raise SourceUnavailable(f"git ({self.git}) is not installed on this worker", retryable=False) from None
        try:
            out, err = proc.communicate(timeout=self.git_timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise _GitFailed(command, "timed out", timed_out=True) from None
        if proc.returncode != 0:
            text = self._scrub(err.decode("utf-8", "replace")).strip()
            lines = [ln for ln in text.splitlines() if ln.strip()][-4:]
            detail = " | ".join(lines)[-600:] or f"exit status {proc.returncode}"
            raise _GitFailed(command, detail)
        return out.decode("utf-8", "replace")


@dataclass(frozen=True)
class _Snapshot:
    """What is computed once per checkout sha: the file list, the index, ADR statuses."""

    files: tuple[str, ...]
    index: BM25Index
    resolver: PathResolver
    superseded: frozenset[str]
    truncated: bool


__all__ = [
    "DEFAULT_ADR_GLOBS",
    "DEFAULT_CLONE_URL_TEMPLATE",
    "DEFAULT_DOC_GLOBS",
    "Checkout",
    "Choice",
    "Mention",
    "PathResolver",
    "RepositorySource",
    "card_query",
    "card_texts",
    "choose_files",
    "decode_text",
    "find_mentions",
    "glob_regex",
    "indexable",
    "is_manifest",
    "render_file",
]

