"""The fold moves in steps (issue: prompt caching cost more than none): while a card's history
grows turn by turn past its budget, the folded range, its summary block and pinned facts stay
byte-identical for several turns, so the provider's cached prefix keeps hitting and the
summarizer is asked once per step. With steps off (fold_step_fraction 0) the range moves every
turn, which is what the old code did."""

from __future__ import annotations

import itertools
from dataclasses import replace

from cardloop.prompts.history import FoldRequest, HistoryFitter
from cardloop.prompts.scrub import Scrubber
from cardloop.prompts.settings import HistorySettings
from cardloop.prompts.tokens import TokenCounter
from tests.prompts.helpers import chat

BUDGET = 2_000


def grow(counter: TokenCounter, settings: HistorySettings, turns: int = 30) -> tuple[list, list, list]:
    """Fit the history after each turn (two new messages a turn); (folded ranges, the summary
    blocks' texts, the distinct ranges the summarizer was asked for)."""
    asked: list[tuple[int, int]] = []

    def summarizer(req: FoldRequest) -> str:
        if (req.first, req.last) not in asked:
            asked.append((req.first, req.last))
        return f"Summary of messages {req.first + 1}-{req.last + 1}: the retry cap was discussed."

    fitter = HistoryFitter(counter, Scrubber(), settings)
    ranges, blocks = [], []
    for turn in range(turns):
        fit = fitter.fit(chat(60 + 2 * turn), BUDGET, summarizer)
        assert fit.mode == "summarized" and fit.tokens <= BUDGET
        ranges.append(fit.folded)
        blocks.append(next(t.text for t in fit.turns if "<conversation_summary" in t.text))
    return ranges, blocks, asked


def test_the_fold_stays_put_between_steps_and_the_summarizer_runs_once_per_step(counter: TokenCounter) -> None:
    ranges, blocks, asked = grow(counter, HistorySettings())
    changes = sum(1 for a, b in itertools.pairwise(ranges) if a != b)
    # Two new messages a turn (about 10% of the budget); a step is 80% of the tail budget.
    assert changes <= 0.3 * len(ranges), ranges
    assert len(asked) <= 1 + 0.3 * len(ranges)
    # Between changes the summary block (summary + pinned facts) is the same bytes.
    for (r1, b1), (r2, b2) in itertools.pairwise(zip(ranges, blocks, strict=True)):
        if r1 == r2:
            assert b1 == b2
    # Each new fold starts where the old one did and covers more: the summaries build on each other.
    assert all(b[0] == a[0] and b[1] > a[1] for a, b in itertools.pairwise(ranges) if a != b)


def test_without_steps_the_fold_moves_every_turn(counter: TokenCounter) -> None:
    ranges, _, asked = grow(counter, replace(HistorySettings(), fold_step_fraction=0.0))
    changes = sum(1 for a, b in itertools.pairwise(ranges) if a != b)
    assert changes >= 0.9 * (len(ranges) - 1)
    assert len(asked) >= 0.9 * len(ranges)


def test_truncation_moves_in_the_same_steps(counter: TokenCounter) -> None:
    fitter = HistoryFitter(counter, Scrubber(), HistorySettings())
    kept_from = []
    for turn in range(30):
        fit = fitter.fit(chat(60 + 2 * turn), BUDGET, None)  # no summarizer: truncation
        assert fit.mode == "truncated" and fit.tokens <= BUDGET
        kept_from.append(fit.folded)
    changes = sum(1 for a, b in itertools.pairwise(kept_from) if a != b)
    assert changes <= 0.35 * len(kept_from), kept_from
