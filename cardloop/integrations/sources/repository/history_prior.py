"""A ranking prior from the checkout's own history: files that changed often lately change again.

Text similarity alone misses the files every change of a kind touches (a changelog, a
registry module, the test file beside the code) because a card rarely shares their words.
The recent commits of the shallow checkout (its `depth`) say which files those are, and which
files change together with the card's best matches (the test beside the module, the docs page of
the command). Both only multiply the score of a file that already matches the card
(ranking.BM25Index.rank's `boosts`), so they reorder relevant files and never bring in one that
matches nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

# A file changed in every recent commit scores (1 + weight) times its text score; one changed
# once, about 1 + weight * log(2) / log(1 + most) times.
DEFAULT_WEIGHT = 1.0


def change_counts(name_lists: Iterable[Iterable[str]]) -> Counter[str]:
    """How many of the given commits (each a list of the paths it changed) touched each path."""
    counts: Counter[str] = Counter()
    for names in name_lists:
        counts.update(set(names))
    return counts


def parse_name_log(log: str) -> list[list[str]]:
    """`git log --format=%x00 --name-only` output: one list of paths per commit."""
    return [[line for line in chunk.splitlines() if line.strip()] for chunk in log.split("\0")[1:]]


def prior_boosts(counts: Mapping[str, int], weight: float = DEFAULT_WEIGHT) -> dict[str, float]:
    """Score factors by change count, on a log scale (a few hot files must not drown the text match)."""
    if weight <= 0 or not counts:
        return {}
    top = math.log1p(max(counts.values()))
    return {path: 1.0 + weight * math.log1p(n) / top for path, n in counts.items() if n > 0}


def combine(*boosts: Mapping[str, float] | None) -> dict[str, float] | None:
    """Several boost maps as one: factors multiply."""
    out: dict[str, float] = {}
    for b in boosts:
        for path, factor in (b or {}).items():
            out[path] = out.get(path, 1.0) * factor
    return out or None


@dataclass(frozen=True)
class RecentHistory:
    """The files each of a checkout's newest commits changed, and the prior they give."""

    commits: tuple[tuple[str, ...], ...] = ()
    weight: float = DEFAULT_WEIGHT

    @cached_property
    def boosts(self) -> dict[str, float]:
        return prior_boosts(change_counts(self.commits), self.weight)

    def with_anchors(self, anchors: Iterable[str]) -> dict[str, float] | None:
        """The prior and the co-change boosts of the card's best matches, as one map."""
        return combine(self.boosts, co_change_boosts(self.commits, anchors, self.weight))


def recent_history(run_git: Callable[[list[str]], str], sha: str, commits: int,
                   weight: float = DEFAULT_WEIGHT) -> RecentHistory:
    """`sha`'s newest `commits` commits (merges excluded: they repeat their parents)."""
    if weight <= 0:
        return RecentHistory((), weight)
    log = run_git(["log", "--no-merges", "--format=%x00", "--name-only", f"-n{commits}", sha])
    return RecentHistory(tuple(tuple(names) for names in parse_name_log(log)), weight)


def co_change_boosts(commits: Iterable[Iterable[str]], anchors: Iterable[str],
                     weight: float = DEFAULT_WEIGHT) -> dict[str, float]:
    """Files that changed together with the `anchors` (the card's best matches): the share of an
    anchor's commits that also touched the file, summed over anchors, as a score factor."""
    anchor_set = list(dict.fromkeys(anchors))
    if weight <= 0 or not anchor_set:
        return {}
    together: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for names in commits:
        touched = set(names)
        for anchor in anchor_set:
            if anchor in touched:
                seen[anchor] += 1
                together.update(touched - {anchor})
    if not seen:
        return {}
    total = sum(seen.values())
    return {path: 1.0 + weight * n / total for path, n in together.items()}
