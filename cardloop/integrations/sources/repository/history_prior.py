"""A ranking prior from the checkout's own history: files that changed often lately change again.

Text similarity alone misses the files every change of a kind touches (a changelog, a
registry module, the test file beside the code) because a card rarely shares their words.
The recent commits of the shallow checkout (its `depth`) say which files those are. The prior
only multiplies the score of a file that already matches the card (ranking.BM25Index.rank's
`boosts`), so it reorders relevant files and never brings in one that matches nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

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


def history_boosts(run_git: Callable[[list[str]], str], sha: str, commits: int,
                   weight: float = DEFAULT_WEIGHT) -> dict[str, float]:
    """The prior for `sha` from its newest `commits` commits (merges excluded: they repeat their parents)."""
    log = run_git(["log", "--no-merges", "--format=%x00", "--name-only", f"-n{commits}", sha])
    return prior_boosts(change_counts(parse_name_log(log)), weight)
