"""Repository context: ADRs, library docs and the source files a card is about.

The card's repository and branch are checked out shallowly into a cache on the worker (git.py);
indexing and reading the chosen files run under the checkout's lock.

What a card gets, in this order (the prompt core keeps equal priorities in this order):

- source files: first the files the card names - in its title, body, notes and chat history,
  including Python traceback frames (`File "/app/app/webhooks/retry.py", line 42`), pytest node
  ids (`tests/test_retry.py::test_backoff`), `path:line` of other languages' traces, GitHub blob
  links and dotted module paths (`app.webhooks.retry`) - most recently mentioned first, resolved
  against the checkout's files (absolute container paths by their longest matching suffix);
  then the files ranked highest for the card's title, body and latest turn (BM25 over 60-line
  passages plus a path and name score, see ranking.py), boosting the files the card's branch
  changed since it left the default branch (`git diff --name-only <merge-base> HEAD`; the
  default branch is fetched as shallowly as the card's, once per branch head), the files
  the checkout's recent commits changed most (history_prior.py), the files defining the names
  the card writes as code (definitions.py) and the files it calls by name (names.py). A file that
  does not fit `max_file_tokens` is excerpted: its head, the lines around the mentioned line
  numbers and around the lines that match the card best, with line numbers ("  42 | code")
  and markers that say how many lines were cut.
- ADRs (`adr_globs`), highest-numbered / newest first, superseded ones last.
- library docs: dependency manifests with their version constraints (pyproject.toml,
  requirements*.txt, package.json, go.mod, Cargo.toml, Gemfile), root first, and the docs the
  repository keeps about its libraries (`doc_globs`), the most relevant to the card first.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cardloop.contracts.secrets import Secret
from cardloop.integrations.sources.base import SourceRequest, SourceResult, default_counter
from cardloop.integrations.sources.ranking import BM25Index, IndexCache
from cardloop.integrations.sources.repository.definitions import Definitions, definition_boosts
from cardloop.integrations.sources.repository.files import (
    DEFAULT_ADR_GLOBS,
    DEFAULT_DOC_GLOBS,
    decode_text,
    glob_regex,
    indexable,
    is_manifest,
)
from cardloop.integrations.sources.repository.git import (
    DEFAULT_CLONE_URL_TEMPLATE,
    SAFE_BRANCH,
    Checkout,
    GitCheckouts,
    GitFailed,
)
from cardloop.integrations.sources.repository.history_prior import (
    DEFAULT_WEIGHT,
    RecentHistory,
    combine,
    recent_history,
)
from cardloop.integrations.sources.repository.mentions import (
    PathResolver,
    card_query,
    card_texts,
    choose_files,
    unresolved_paths,
)
from cardloop.integrations.sources.repository.names import FileNames
from cardloop.integrations.sources.repository.render import render_file
from cardloop.prompts.card import Card, ContextItem, ContextKind
from cardloop.prompts.logs import Counter, excerpt_text


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
        token: str | Secret | None = None,
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
        history_weight: float = DEFAULT_WEIGHT,
        max_branch_files: int = 100,
        latest_messages: int = 3,
        git_timeout: float = 120.0,
        lock_timeout: float = 300.0,
        counter: Counter | None = None,
        git: str = "git",
        index_cache_size: int = 4,
    ) -> None:
        if depth < 1 or max_files < 0 or max_file_tokens < 1 or max_adrs < 0:
            raise ValueError("depth and max_file_tokens must be >= 1, max_files and max_adrs >= 0")
        self.checkouts = GitCheckouts(cache_dir, clone_url_template=clone_url_template, token=token, depth=depth,
                                      git=git, git_timeout=git_timeout, lock_timeout=lock_timeout)
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
        self.history_weight = history_weight
        self.max_branch_files = max_branch_files
        self.latest_messages = latest_messages
        counter = counter or default_counter()
        # Gathers for different repositories run in parallel threads, and a TokenCounter's LRU
        # cache is not thread-safe; counting holds the GIL anyway, so a lock costs little.
        count_lock = threading.Lock()

        def count(text: str) -> int:
            with count_lock:
                return counter(text)

        self.count: Counter = count
        self._adr_res = [glob_regex(g) for g in self.adr_globs]
        self._doc_res = [glob_regex(g) for g in self.doc_globs]
        self._snapshots: IndexCache[tuple[str, str], _Snapshot] = IndexCache(index_cache_size)
        self._history: IndexCache[tuple[str, str], RecentHistory] = IndexCache(64)
        self._branch_diffs: IndexCache[tuple[str, str, str], tuple[tuple[str, ...], str]] = IndexCache(64)

    def __repr__(self) -> str:
        return f"RepositorySource(checkouts={self.checkouts!r})"

    # --- public entry points ---------------------------------------------------------------

    def gather(self, request: SourceRequest) -> SourceResult:
        card = request.card
        if not card.repo:
            return SourceResult(self.name, notes=("the card names no repository: no repository context",))
        branch = self.checkouts.check_branch(card.branch, card.repo)
        with self.checkouts.locked(card.repo):
            checkout = self.checkouts.checkout(card.repo, branch)
            return self._gather_locked(card, checkout)

    def checkout(self, repo: str, branch: str | None) -> Checkout:
        """Clone or update the cached checkout of `repo` at `branch` (None: the default branch)."""
        branch = self.checkouts.check_branch(branch, repo)
        with self.checkouts.locked(repo):
            return self.checkouts.checkout(repo, branch)

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
        history = self._history.get_or_build((co.repo, co.sha), lambda: self._history_prior(co))
        branch = dict.fromkeys(changed, self.branch_boost) if changed else None
        defined = definition_boosts(snap.definitions, (card.title, card.body))
        named = snap.names.boosts((card.title,))  # the title: with the body, no better (README)
        # The best three matches anchor a second pass that also boosts what changes with them.
        anchors, _ = choose_files(card, snap.index, snap.resolver, max_files=3, query=query, exclude=not_source,
                                  boosts=combine(branch, history.boosts, defined, named))
        # A few spare candidates stand in for chosen files that turn out binary or too large.
        chosen, mentions = choose_files(
            card, snap.index, snap.resolver, max_files=self.max_files + 3, query=query, exclude=not_source,
            boosts=combine(branch, history.with_anchors(c.path for c in anchors), defined, named),
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
        out = self.checkouts.run(["ls-files", "-z"], co.path)
        files = [p for p in out.split("\0") if p]
        candidates = [p for p in files if indexable(p)]
        truncated = len(candidates) > self.max_index_files
        if truncated:
            # Shallow paths first: top-level code says more about a repository than deep fixtures.
            candidates = sorted(candidates, key=lambda p: (p.count("/"), p))[: self.max_index_files]
        definitions = Definitions()

        def docs() -> Iterator[tuple[str, str]]:
            for p in candidates:
                if (text := self._read(co, p)) is not None:
                    definitions.add(p, text)  # in the same read as the index: each file read once
                    yield p, text

        index = BM25Index(docs())
        superseded = set()
        for p in files:
            if any(r.match(p) for r in self._adr_res):
                head = (self._read(co, p) or "")[:2000]
                if re.search(r"^\W*status\W*:?\W*(?:superseded|deprecated|rejected)", head, re.I | re.M):
                    superseded.add(p)
        return _Snapshot(
            files=tuple(files),
            index=index,
            definitions=definitions,
            names=FileNames(index.paths),
            resolver=PathResolver(files),
            superseded=frozenset(superseded),
            truncated=truncated,
        )

    def _history_prior(self, co: Checkout) -> RecentHistory:
        """The checkout's recent commits (history_prior.py); none when git cannot say (the prior
        is a hint, never a reason to fail the source)."""
        try:
            return recent_history(lambda args: self.checkouts.run(args, co.path), co.sha,
                                  self.checkouts.depth, self.history_weight)
        except GitFailed:
            return RecentHistory((), 0.0)

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
            if not SAFE_BRANCH.match(base) or ".." in base:
                return (), f"base branch {base!r} is not a usable name"
            ref = f"refs/remotes/origin/{base}"
            self.checkouts.run(["fetch", "--depth", str(self.checkouts.depth), "--no-tags", "--quiet",
                                self.checkouts.url(co.repo), f"+refs/heads/{base}:{ref}"], co.path)
            merge_base = self.checkouts.run(["merge-base", "HEAD", ref], co.path).strip()
            out = self.checkouts.run(["diff", "--name-only", "--no-renames", "-z", merge_base, "HEAD"], co.path)
        except GitFailed as exc:
            return (), f"no merge base with the base branch within depth {self.checkouts.depth} ({exc.command} failed)"
        files = tuple(p for p in out.split("\0") if p)
        if len(files) > self.max_branch_files:
            return (), f"{co.branch} changed {len(files):,} files since {base}: too many to boost"
        shown = ", ".join(files[:10]) + (" ..." if len(files) > 10 else "")
        return files, f"changed on {co.branch} since {base} (boosted): {shown or 'nothing'}"

    def _default_branch(self, co: Checkout) -> str | None:
        out = self.checkouts.run(["ls-remote", "--symref", self.checkouts.url(co.repo), "HEAD"], co.path)
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


@dataclass(frozen=True)
class _Snapshot:
    """What is computed once per checkout sha: the file list, the index, ADR statuses."""

    files: tuple[str, ...]
    index: BM25Index
    definitions: Definitions
    names: FileNames  # files the card calls by name rank up (names.py)
    resolver: PathResolver
    superseded: frozenset[str]
    truncated: bool
