"""Retrieval quality and speed of the repository source's file ranking.

Quality, from a real repository's history: for every commit that is not a merge and touches
at most 30 files, the commit message plays the card (subject = title, the rest = body) and the
files the commit changed that already existed in its parent are the answer. The files of the
PARENT tree are ranked the way RepositorySource ranks them (`choose_files`: files the message
names first, then BM25 over 60-line passages plus a path and name score) and, in the same run,
by plain BM25 over whole files' content (no passages, no path or name, no mentions): the
baseline. The steps in between are printed too (then files defining the names the card writes
as code rank up; the last, ours: files the card calls by name rank up). Not measured here: the
boost for files a feature branch changed (this history is one line of commits on main).

    recall_at_5 / recall_at_10   share of the answer files in the top 5 / 10, mean over commits
    bm25_recall_at_5             the same for the baseline

Speed, on a synthetic 5,000-file repository (the first 5,000 usable *.py files of this
virtualenv's site-packages, read into memory first; no git needed):

    rank_seconds_5000   building the index plus ranking one card's query: what the first
                        card on a new checkout sha pays (later cards reuse the index and pay
                        only the query, printed as query_ms_5000)

Run: .venv/bin/python bench/retrieval.py [--repo PATH] [--max-commits N] [--max-commit-files 30] [--files 5000]
     [--verbose] [--misses]
(--repo may be a bare clone: only git plumbing is used.)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cardloop.integrations.sources.ranking import BM25Index, BM25Params
from cardloop.integrations.sources.repository import PathResolver, card_query, choose_files, decode_text, indexable
from cardloop.integrations.sources.repository.definitions import Definitions, definition_boosts
from cardloop.integrations.sources.repository.history_prior import RecentHistory, combine, recent_history
from cardloop.integrations.sources.repository.names import FileNames
from cardloop.prompts.card import Card

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_BYTES = 256_000  # RepositorySource's default
DEPTH = 50  # [sources.repository] depth: the history a shallow checkout has


def git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, check=True).stdout


@dataclass(frozen=True)
class Case:
    sha: str
    subject: str
    body: str
    answer: frozenset[str]
    files: dict[str, str]  # the parent tree's indexable text files
    history: RecentHistory  # the parent's newest DEPTH commits, as a shallow checkout has them


def tree_texts(repo: Path, commit: str) -> dict[str, str]:
    """Every indexable text file of `commit`'s tree, read with one `git cat-file --batch`."""
    names = [p for p in git(repo, "ls-tree", "-r", "-z", "--name-only", commit).decode().split("\0") if p]
    names = [p for p in names if indexable(p)]
    if not names:
        return {}
    out = git(repo, "cat-file", "--batch", data="".join(f"{commit}:{p}\n" for p in names).encode())
    texts: dict[str, str] = {}
    pos = 0
    for path in names:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].split()
        pos = header_end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        data = out[pos : pos + size]
        pos += size + 1
        if size <= MAX_FILE_BYTES and (text := decode_text(data)) is not None:
            texts[path] = text
    return texts


def cases(repo: Path, max_files: int, max_commits: int = 0) -> tuple[list[Case], int]:
    """The usable commits, newest first; at most `max_commits` of them (0: all)."""
    log = git(repo, "log", "--format=%H %P").decode().split("\n")
    out: list[Case] = []
    skipped = 0
    for line in log:
        if max_commits and len(out) >= max_commits:
            break
        shas = line.split()
        if len(shas) != 2:  # a root commit has no parent tree; a merge has two
            skipped += bool(shas)
            continue
        sha, parent = shas
        status = git(repo, "diff-tree", "--no-commit-id", "-r", "--name-status", "--no-renames", parent, sha).decode()
        changed = [row.split("\t", 1) for row in status.splitlines() if "\t" in row]
        if not changed or len(changed) > max_files:
            skipped += 1
            continue
        files = tree_texts(repo, parent)
        # New files cannot be found in the parent: the answer is what existed and changed.
        answer = frozenset(p for kind, p in changed if kind in ("M", "D", "T") and p in files)
        if not answer:
            skipped += 1
            continue
        message = git(repo, "log", "-1", "--format=%B", sha).decode().strip()
        subject, _, body = message.partition("\n")
        history = recent_history(lambda args: git(repo, *args).decode(), parent, DEPTH)
        out.append(Case(sha, subject.strip(), body.strip(), answer, files, history))
    return out, skipped


def two_passes(card: Card, index: BM25Index, resolver: PathResolver, query: dict[str, float],
               history: RecentHistory, *boosts: Mapping[str, float] | None) -> list[str]:
    """As RepositorySource ranks: the best three matches anchor a second pass with co-change boosts."""
    first = [c.path for c in choose_files(card, index, resolver, max_files=3, query=query,
                                          boosts=combine(history.boosts, *boosts))[0]]
    return [c.path for c in choose_files(card, index, resolver, max_files=10, query=query,
                                         boosts=combine(history.with_anchors(first), *boosts))[0]]


def recall(ranked: list[str], answer: frozenset[str], k: int) -> float:
    return len(answer & set(ranked[:k])) / len(answer)


def evaluate(all_cases: list[Case], verbose: bool, misses: bool = False) -> dict[str, tuple[float, float]]:
    variants: dict[str, list[tuple[float, float]]] = {
        "bm25 (content only)": [], "+ passages": [], "+ path and name": [], "+ mentions": [],
        "+ change history": [], "+ co-change": [], "+ definitions": [], "+ file names (ours)": [],
    }
    for case in all_cases:
        card = Card(id=f"bench-{case.sha[:8]}", title=case.subject or "(no subject)", body=case.body)
        query = card_query(card)
        docs = list(case.files.items())
        baseline = BM25Index(docs, BM25Params.content_only())
        passages = BM25Index(docs, BM25Params(path_weight=0.0, name_weight=0.0))
        index = BM25Index(docs)
        resolver = PathResolver(list(case.files))
        runs = {
            "bm25 (content only)": [p for p, _ in baseline.rank(card.title + "\n" + card.body, 10)],
            "+ passages": [p for p, _ in passages.rank(query, 10)],
            "+ path and name": [p for p, _ in index.rank(query, 10)],
            "+ mentions": [c.path for c in choose_files(card, index, resolver, max_files=10, query=query)[0]],
            "+ change history": [c.path for c in choose_files(card, index, resolver, max_files=10, query=query,
                                                              boosts=case.history.boosts)[0]],
        }
        # As RepositorySource does: the best three matches anchor a second pass with co-change boosts.
        anchors = runs["+ change history"][:3]
        runs["+ co-change"] = [c.path for c in choose_files(
            card, index, resolver, max_files=10, query=query, boosts=case.history.with_anchors(anchors))[0]]
        # As RepositorySource does: files defining the names the card writes as code rank up, in both passes.
        defined = definition_boosts(Definitions.of(docs), (card.title, card.body))
        runs["+ definitions"] = two_passes(card, index, resolver, query, case.history, defined)
        # As RepositorySource does: files the card calls by name rank up too, in both passes.
        named = FileNames(case.files).boosts((card.title,))
        runs["+ file names (ours)"] = two_passes(card, index, resolver, query, case.history, defined, named)
        for name, ranked in runs.items():
            variants[name].append((recall(ranked, case.answer, 5), recall(ranked, case.answer, 10)))
        if verbose:
            r5 = {name: f"{recall(r, case.answer, 5):.2f}" for name, r in runs.items()}
            print(f"  {case.sha[:8]} files={len(docs):4d} answer={len(case.answer):2d} r@5={r5}  {case.subject[:60]}")
        ours = runs["+ file names (ours)"]
        if misses and recall(ours, case.answer, 5) < 1.0:
            print_miss(case, ours, runs["bm25 (content only)"])
    return {name: (statistics.fmean(r[0] for r in rows), statistics.fmean(r[1] for r in rows))
            for name, rows in variants.items()}


def print_miss(case: Case, ours: list[str], bm25: list[str]) -> None:
    """One commit whose answer our top 5 does not hold in full: what was missed, what stood in its place."""
    missed = sorted(case.answer - set(ours[:5]))
    print(f"  miss {case.sha[:8]} r@5={recall(ours, case.answer, 5):.2f} (bm25 {recall(bm25, case.answer, 5):.2f}) "
          f"{case.subject[:90]}")
    print(f"    missed: {', '.join(missed)}")
    print(f"    ours:   {', '.join(ours[:5]) or '(nothing matched)'}")
    print(f"    bm25:   {', '.join(bm25[:5]) or '(nothing matched)'}")


def synthetic_docs(n: int) -> list[tuple[str, str]]:
    site = Path(sysconfig.get_paths()["purelib"])
    docs: list[tuple[str, str]] = []
    for path in sorted(site.rglob("*.py")):
        rel = path.relative_to(site).as_posix()
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = decode_text(path.read_bytes())
        except OSError:
            continue
        if text is not None:
            docs.append((rel, text))
            if len(docs) >= n:
                break
    return docs


def timing(n: int) -> tuple[int, float, float, float]:
    docs = synthetic_docs(n)
    card = Card(id="bench-timing", title="HTTP client retries a request after a connection pool timeout",
                body="The retry backoff ignores the Retry-After header of 429 responses; see the transport and "
                     "the connection pool. Requests hang when the pool is exhausted.")
    query = card_query(card)
    started = time.perf_counter()
    index = BM25Index(docs)
    built = time.perf_counter()
    index.rank(query, 10)
    first = time.perf_counter()
    warm = []
    for _ in range(20):
        t = time.perf_counter()
        index.rank(query, 10)
        warm.append(time.perf_counter() - t)
    return len(docs), built - started, statistics.median(warm), first - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="a git repository (default: this one)")
    parser.add_argument("--max-commit-files", type=int, default=30)
    parser.add_argument("--files", type=int, default=5000, help="files in the synthetic timing repository")
    parser.add_argument("--max-commits", type=int, default=0,
                        help="evaluate only the newest N usable commits (0: all; a long public history takes minutes)")
    parser.add_argument("--verbose", action="store_true", help="one line per commit")
    parser.add_argument("--misses", action="store_true",
                        help="commits whose changed files our top 5 misses: what was missed, what ranked instead")
    args = parser.parse_args()

    started = time.perf_counter()
    all_cases, skipped = cases(args.repo.resolve(), args.max_commit_files, args.max_commits)
    if not all_cases:
        sys.exit(f"no usable commits in {args.repo}")
    print(f"repository: {args.repo.resolve()}: {len(all_cases)} commits evaluated, {skipped} skipped "
          f"(merges, root, > {args.max_commit_files} files, or only new files)")
    results = evaluate(all_cases, args.verbose, args.misses)
    print(f"{'variant':<24} {'recall@5':>9} {'recall@10':>10}")
    for name, (r5, r10) in results.items():
        print(f"{name:<24} {r5:>9.3f} {r10:>10.3f}")
    n, index_s, query_s, rank_s = timing(args.files)
    print(f"synthetic repository: {n:,} files; index {index_s:.2f} s, one query {query_s * 1000:.1f} ms (warm median)")
    print(f"index_seconds_{args.files}: {index_s:.3f}")
    print(f"query_ms_{args.files}: {query_s * 1000:.2f}")
    print(f"total bench time: {time.perf_counter() - started:.1f} s")
    ours = results["+ file names (ours)"]
    print(f"recall_at_5: {ours[0]:.3f}")
    print(f"recall_at_10: {ours[1]:.3f}")
    print(f"bm25_recall_at_5: {results['bm25 (content only)'][0]:.3f}")
    print(f"rank_seconds_{args.files}: {rank_s:.3f}")


if __name__ == "__main__":
    main()
