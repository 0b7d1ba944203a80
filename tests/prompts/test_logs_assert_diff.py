"""A long assertion diff keeps its head, what differs and where the test is.

The fixtures are real output (Python 3.11.7, Node 20.20.2): pytest 9.2.0 `-vv` (default and
--tb=short) on tests/cardloop/integrations/sources/fixtures/junit/pytest/
xunit1_lines_source.py.txt, whose tests compare two large dicts, lists and strings and call
unittest's assertEqual (pytest_vv_*); `python -m unittest` on its TestUnit (unittest_*); jest
30.5.2's toEqual on two 40-key objects, `CI=true npx jest --ci` (jest_*). Each is put into a
GitHub Actions log with timestamps after 2,000 lines of install noise, as a build log is.
"""

from __future__ import annotations

import time

import pytest

from cardloop.prompts.log_errors import error_spans
from cardloop.prompts.logs import excerpt_log, strip_ansi
from tests.prompts.test_logs import assert_well_formed, count, fixture, lines_of


def gha(body: str, noise: int = 2000) -> str:
    out = ["##[group]Run pip install -e .[dev]"]
    out += [f"  Downloading pkg_{i % 997}-{i}.0.0-py3-none-any.whl ({i % 900 + 10} kB)" for i in range(noise)]
    out += ["##[endgroup]", "##[group]Run pytest -vv", *lines_of(strip_ansi(body))]
    out.append("##[error]Process completed with exit code 1.")
    return "\n".join(f"2026-11-29T07:{i // 600 % 60:02d}:{i // 10 % 60:02d}.{i:07d}Z {line}"
                     for i, line in enumerate(out)) + "\n"


def kept(log: str, budget: int) -> list[str]:
    e = excerpt_log(log, budget, count)
    out = assert_well_formed(log, e, budget)
    return [line[29:] if line[:4].isdigit() else line for line in out]


@pytest.mark.parametrize("name", ["pytest_vv_assert_diff.txt", "pytest_vv_short_assert_diff.txt"])
def test_dict_diff_keeps_head_differing_items_and_location(name: str) -> None:
    out = kept(gha(fixture(name)), 4000)
    text = "\n".join(out)
    # The head of the dict comparison, what the explanation says differs, and where.
    assert "AssertionError: assert {'key_000'" in text
    assert any(line.strip() == "E         Differing items:" or line.strip() == "E     Differing items:"
               for line in out)
    assert "{'key_017': {'value': 17, 'tags': ['t17', 'u17']}} != {'key_017': {'value': 999" in text
    assert "Left contains 1 more item:" in text
    assert "{'key_039': {'tags': ['t39', 'u39'], 'value': 39}}" in text
    # The first changed lines of the full diff, and the middle of it cut with a marker.
    assert any(line.rstrip().endswith("'value': 999,") and line.lstrip("E ").startswith("-") for line in out)
    assert any(line.startswith("[... ") and "lines cut" in line for line in out)
    # The location of each failing test: under the E lines (long) or above them (short).
    where = ("test_big.py:13: AssertionError" if "short" not in name else "test_big.py:13: in test_dicts")
    assert where in out
    assert ("test_big.py:17: AssertionError" if "short" not in name else "test_big.py:17: in test_lists") in out
    # The list comparison's explanation survives too.
    assert any("At index 30 diff: 'item-30' != 'item-31'" in line for line in out)


def test_unittest_diff_inside_pytest_keeps_changed_lines_and_location() -> None:
    out = kept(gha(fixture("pytest_vv_assert_diff.txt")), 4000)
    assert any(line.startswith("E       -  'key_010'") and "'value': 10}" in line for line in out)
    assert any(line.startswith("E       +  'key_010'") and "'value': -1}" in line for line in out)
    assert "test_big.py:32: AssertionError" in out


def test_tight_budget_still_keeps_the_last_failure_location() -> None:
    out = kept(gha(fixture("pytest_vv_assert_diff.txt")), 2000)
    assert "test_big.py:23: AssertionError" in out  # the last block's location besides its head


def test_short_run_of_e_lines_is_unchanged() -> None:
    # A plain "E  assert 1 == 2" block is short: nothing besides its lines is picked.
    lines = ["    def test_x():", ">       assert 1 == 2", "E       assert 1 == 2", "",
             "tests/test_x.py:2: AssertionError"]
    spans = error_spans(lines)
    assert [(s.start, s.end, s.explain) for s in spans] == [(2, 4, ())]


def test_five_megabytes_of_e_lines_stay_linear() -> None:
    # One run of 100,000 E lines, many of them explanation and diff lines: one look each.
    block = ["E         Differing items:", "E         {'a': 1} != {'a': 2}", "E         -  'a': 1,",
             "E         +  'a': 2,"] * 25_000
    lines = [f"2026-11-29T07:00:00.0000000Z {line}" for line in block]
    assert len("\n".join(lines)) > 5_000_000
    start = time.perf_counter()
    spans = error_spans(lines)
    took = time.perf_counter() - start
    assert len(spans) == 1 and len(spans[0].explain) <= 16
    assert took < 5.0, took


def test_unittest_diff_keeps_its_changed_lines() -> None:
    # unittest's own runner: the diff is under the AssertionError, on no error line.
    out = kept(gha(fixture("unittest_assert_diff.txt")), 600)
    assert any(line.startswith("AssertionError: {'key[482 chars]") for line in out)
    assert "-  'key_010': {'tags': ['t10', 'u10'], 'value': 10}," in out
    assert "+  'key_010': {'tags': ['t10', 'u10'], 'value': -1}," in out


def test_jest_expected_received_keeps_diff_and_test_frame() -> None:
    out = [line.strip() for line in kept(gha(fixture("jest_expected_received.txt")), 600)]
    for line in ("● config objects match", "expect(received).toEqual(expected) // deep equality",
                 '-     "value": 999,', '+     "value": 17,', "at Object.toEqual (big.test.js:11:16)"):
        assert line in out, line
    # Tighter, where and what changed come before the matcher's headers.
    out = [line.strip() for line in kept(gha(fixture("jest_expected_received.txt")), 300)]
    assert {'-     "value": 999,', '+     "value": 17,', "at Object.toEqual (big.test.js:11:16)"} <= set(out)


def test_lines_after_other_errors_are_not_picked() -> None:
    # A "- item" list after a plain error line is not a diff: nothing follows a non-assertion.
    lines = ["ERROR: could not resolve dependencies", "- numpy 2.0", "+ numpy 1.26", "done"]
    assert [s.explain for s in error_spans(lines)] == [()]


def test_many_unittest_failures_stay_linear() -> None:
    block = ["Traceback (most recent call last):", '  File "t.py", line 3, in test_x',
             "    self.assertEqual(a, b)", "AssertionError: 'a' != 'b'"] + [f"- a{i}\n+ b{i}" for i in range(30)]
    lines = "\n".join(block * 3000).split("\n")
    start = time.perf_counter()
    spans = error_spans(lines)
    took = time.perf_counter() - start
    assert len(spans) == 3000 and all(len(s.explain) == 8 for s in spans)
    assert took < 5.0, took
