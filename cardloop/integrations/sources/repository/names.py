"""Files the card calls by their name: "Update README", "Fix the Makefile rules",
"fix(res.send): ...", "sessions: fix hooks type".

A card names a file by its name more often than by its path: the name's words are in its text,
but the path and name score of the text ranking (ranking.BM25Index) saturates and weighs them by
idf over the files' contents, where a word like "readme" or "send" is common, so a file whose
whole name the card spells can lose to a long file that uses the card's other words. Here a file
whose name's words ALL occur in the card's title (all of "res" and "send" for `test/res.send.js`;
RepositorySource passes the title only: the body too measured no better) has its
score multiplied, like the definitions and the history prior (ranking.BM25Index.rank's `boosts`):
it reorders files that match the card and never brings in one that matches nothing. A name that
many files share (`index.js`, `__init__.py`) says nothing about which one and is ignored.

A title that spells several files' names says less about each: "Jira, Trello: ask whose
credential it is only when a comment carries the marker" names `jira.py`, `trello.py`,
`comments.py` and every file called `marker`, `ask` or `run` that a prose title happens to
spell. The boost is shared: one named file gets the whole factor, k named files
1 + (factor - 1) * 2 / (k + 1) each (x2, x1.67, x1.5, ... x1.29 for six). With the full factor
for every named file this repository's own history lost 0.014 recall@5 (its titles are prose
and spell many file names); shared, it gains 0.006 and no public repository measured loses.

Measured with bench/retrieval.py (400 newest commits, the same settings everywhere): see the
README's Benchmarks section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cardloop.integrations.sources.ranking import path_fields, term_counts

MAX_SHARING_FILES = 3  # a name more files than this carry names none of them
DEFAULT_FACTOR = 2.0


class FileNames:
    """A repository's file names as sets of index terms, built once per checkout."""

    def __init__(self, paths: Iterable[str]) -> None:
        groups: dict[frozenset[str], list[str]] = {}
        for path in paths:
            terms = frozenset(term_counts(path_fields(path)[1]))
            if terms:
                groups.setdefault(terms, []).append(path)
        # Looked up by each name's rarest-looking term would need idf; any term will do, since a
        # query must hold them all: the first in sorted order keeps the lookup deterministic.
        self._by_term: dict[str, list[tuple[frozenset[str], tuple[str, ...]]]] = {}
        for terms, files in groups.items():
            if len(files) <= MAX_SHARING_FILES:
                self._by_term.setdefault(min(terms), []).append((terms, tuple(files)))

    def named(self, texts: Iterable[str]) -> set[str]:
        """The files whose name's terms all occur in `texts`."""
        words: set[str] = set()
        for text in texts:
            words.update(term_counts(text))
        out: set[str] = set()
        for word in words:
            for terms, files in self._by_term.get(word, ()):
                if terms <= words:
                    out.update(files)
        return out

    def boosts(self, texts: Iterable[str], factor: float = DEFAULT_FACTOR) -> Mapping[str, float]:
        """Score factors for the files the texts call by name, the factor shared among them."""
        if factor == 1.0:
            return {}
        named = self.named(texts)
        return dict.fromkeys(named, shared_factor(factor, len(named)))


def shared_factor(factor: float, named: int) -> float:
    """Each file's factor when a title names `named` files: the whole factor for one, less for more."""
    return 1.0 + (factor - 1.0) * 2.0 / (named + 1)
