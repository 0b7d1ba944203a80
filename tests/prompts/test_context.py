from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.context import ContextFitter
from cardloop.prompts.scrub import Scrubber
from cardloop.prompts.settings import ContextSettings
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.prompts.helpers import card, item

BUILD_LOG = "\n".join(
    [f"2026-11-01T10:00:{i % 60:02d}Z collecting... step {i}" for i in range(3_000)]
    + ["E   AssertionError: expected 5 retries, got 3",
       "FAILED tests/test_retry.py::test_backoff - AssertionError",
       "##[error]Process completed with exit code 1."]
    + [f"2026-11-01T10:01:{i % 60:02d}Z cleanup {i}" for i in range(50)]
)


def fit(c, stage, budget, counter, **settings):
    return ContextFitter(counter, Scrubber(), ContextSettings(**settings)).fit(c, stage, budget)


def test_priority_order_puts_logs_ahead_of_source_files(counter: TokenCounter) -> None:
    c = card(notes="Remember the ADR.", context=[
        item(ContextKind.ADR, "ADR text", "docs/adr/1.md"),
        item(ContextKind.SOURCE_FILE, "def f(): pass", "app/f.py"),
        item(ContextKind.POD_LOG, "Traceback ...\nValueError: bad", "pod/api-1"),
        item(ContextKind.BUILD_LOG, "##[error]boom", "actions/run/1"),
    ])
    blocks = fit(c, Stage.ERROR_FIXING, 5_000, counter).blocks
    kinds = [b.split('kind="')[1].split('"')[0] for b in blocks[1:]]
    assert kinds == ["card", "notes", "build_log", "pod_log", "source_file", "adr"]


def test_logs_only_go_into_error_fixing(counter: TokenCounter) -> None:
    c = card(context=[item(ContextKind.BUILD_LOG, "##[error]boom", "actions/run/1")])
    result = fit(c, Stage.REVIEW, 5_000, counter)
    assert not any("build_log" in b for b in result.blocks)
    row = next(r for r in result.rows if r.name.startswith("build_log"))
    assert row.status == "excluded" and "error_fixing" in row.reason


def test_long_log_keeps_head_tail_and_error_lines_with_a_marker(counter: TokenCounter) -> None:
    c = card(context=[item(ContextKind.BUILD_LOG, BUILD_LOG, "actions/run/7")])
    result = fit(c, Stage.ERROR_FIXING, 3_000, counter)
    log = next(b for b in result.blocks if "build_log" in b)
    assert "expected 5 retries, got 3" in log
    assert "##[error]Process completed with exit code 1." in log
    assert "step 0" in log and "cleanup 49" in log
    assert "lines cut" in log
    row = next(r for r in result.rows if r.name.startswith("build_log"))
    assert row.status == "cut"
    assert result.tokens <= 3_000


def test_notes_always_go_in_even_when_space_is_short(counter: TokenCounter) -> None:
    c = card(notes="NOTE " * 3_000, context=[item(ContextKind.SOURCE_FILE, "x = 1\n" * 50, "a.py")])
    result = fit(c, Stage.CODING, 1_000, counter)
    assert any('kind="notes"' in b for b in result.blocks)
    assert result.tokens <= 1_000
    assert next(r for r in result.rows if r.name.startswith("source_file")).status == "dropped"


def test_dropped_items_name_the_reason(counter: TokenCounter) -> None:
    files = [item(ContextKind.SOURCE_FILE, f"# file {i}\n" + "x = 1\n" * 400, f"f{i}.py") for i in range(10)]
    result = fit(card(context=files), Stage.CODING, 2_500, counter)
    dropped = [r for r in result.rows if r.status == "dropped"]
    assert dropped and all("over budget" in r.reason for r in dropped)


def test_item_cap_excerpts_one_huge_file(counter: TokenCounter) -> None:
    big = "\n".join(f"line {i} = compute({i})" for i in range(5_000))
    result = fit(card(context=[item(ContextKind.SOURCE_FILE, big, "big.py")]), Stage.CODING,
                 15_000, counter, max_item_tokens=1_000)
    row = next(r for r in result.rows if r.name.startswith("source_file"))
    assert row.status == "cut" and row.tokens <= 1_000 and "item cap" in row.reason


def test_tiny_budget_drops_everything_cleanly(counter: TokenCounter) -> None:
    result = fit(card(notes="n"), Stage.CODING, 10, counter)
    assert result.blocks == () and result.tokens == 0


def test_shared_fit_caches_tell_apart_cards_that_differ_in_one_part(counter: TokenCounter) -> None:
    # The fits are cached by the card's parts (recent cards' texts compared, others hashed): a card
    # differing in one text, in None against "None", or in a time's offset is fitted afresh.
    at = datetime(2026, 11, 1, 10, tzinfo=UTC)
    base = [item(ContextKind.SOURCE_FILE, "def f(): pass", "app/f.py"),
            ContextItem(kind=ContextKind.ADR, source="docs/adr/1.md", content="Use retries.", created_at=at)]
    variants = [
        card(context=base),
        card(context=[base[0], base[1].model_copy(update={"content": "Use retries!"})]),
        card(context=[base[0], base[1].model_copy(update={"created_at": at.astimezone(timezone(timedelta(hours=2)))})]),
        card(context=base, branch="None"),
        card(context=base, branch=None),
    ]
    shared = ContextFitter(counter, Scrubber(), ContextSettings())
    for c in [*variants, *reversed(variants)]:  # the second pass finds every card among the recent ones
        fresh = ContextFitter(counter, Scrubber(), ContextSettings()).fit(c, Stage.CODING, 4_000)
        assert shared.fit(c, Stage.CODING, 4_000).blocks == fresh.blocks


def test_a_settings_dict_changed_in_place_is_a_new_fit(counter: TokenCounter) -> None:
    # The settings' repr in the fit key is kept per settings object, and its dicts' items are
    # compared on every use: a priority changed in place must reorder the items, not hit the old fit.
    c = card(context=[item(ContextKind.SOURCE_FILE, "def f(): pass", "app/f.py"),
                      item(ContextKind.ADR, "Use retries.", "docs/adr/1.md")])
    settings = ContextSettings()
    shared = ContextFitter(counter, Scrubber(), settings)

    def kinds() -> list[str]:
        return [b.split('kind="')[1].split('"')[0] for b in shared.fit(c, Stage.CODING, 4_000).blocks[1:]]

    assert kinds() == ["card", "source_file", "adr"]
    settings.priorities[ContextKind.ADR] = 99  # type: ignore[index]
    assert kinds() == ["card", "adr", "source_file"]
