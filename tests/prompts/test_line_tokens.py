"""exact_raw against the tokenizer itself: the count it builds from line counts must be the
count of the whole text, on logs, code and text made to break it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cardloop.prompts.line_tokens import exact_raw
from cardloop.prompts.tokens import TokenCounter

COUNTER = TokenCounter()
LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
ROOT = Path(__file__).resolve().parent.parent.parent


def whole(text: str) -> int:
    return len(COUNTER.encode(text))


def by_lines(text: str) -> int:
    # Fresh counts only: no cache may stand in for the tokenizer here.
    return exact_raw(text, whole, whole)


def test_fixture_logs_and_sources() -> None:
    texts = [p.read_text() for p in sorted(LOGS.iterdir())]
    texts += [p.read_text() for p in sorted((ROOT / "prompts").glob("*.py"))[:12]]
    texts.append((ROOT / "README.md").read_text()[:60_000])
    for text in texts:
        assert by_lines(text) == whole(text)
        for cut in (1, 7, 100):  # windows that start and end mid-line, as excerpts and frames do
            piece = text[cut: cut + 5_000]
            assert by_lines(piece) == whole(piece)


def test_edges() -> None:
    for text in ["", "\n", "\n\n", "a", "a\n", "a\nb", "a.\nb", "a .\nb", "a  .\nb", " .\nb", "a\t.\nb",
                 "a  \nb", "a\t \n\tb", "a. \nb", "x\n\n\ny", "x\n  \ny", "x\n  y", "x:\n\ty", "x\r\ny",
                 "x.\r\ny", "x\n\ry", "it's\nok", "don'\nt", "1234\n5678", "a—\nb", "a\n—b", "a\u00a0\nb",
                 "a \u00a0\nb", "a\x1c\nb", "a\n\x1cb", "<untrusted kind=\"x\">\nline\n</untrusted>",
                 "a )\n\n)\n", "::\n::\n", "  \n", "\t\n\t", "x\n \n"]:
        assert by_lines(text) == whole(text), repr(text)


LINE_CHARS = st.sampled_from([*"ab9 \t.:)({-_'\"é—\u00a0\r\x1c", "xyz", "  ", "...", "'s", "\u3000"])
lines = st.lists(LINE_CHARS, max_size=8).map("".join)


@hsettings(max_examples=600, deadline=None)
@given(st.lists(lines, max_size=12).map("\n".join))
def test_random_lines(text: str) -> None:
    assert by_lines(text) == whole(text)


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30),
                max_size=10).map("\n".join))
def test_random_unicode_lines(text: str) -> None:
    assert by_lines(text) == whole(text)
