"""parse_junit on JUnit XML that real runners wrote (fixtures/junit/README.md says how each was
made), and github_tests reading those files out of an artifact from the loopback GitHub."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from cardloop.integrations.sources.github import GitHubClient, GitHubTestResultsSource
from cardloop.integrations.sources.junit import FailedTest, JUnitReport, parse_junit
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.cardloop.integrations.sources.fake_github import REPO, FakeGitHub, card, req, seed_tests
from tests.prompts.helpers import cpu_best

FIXTURES = Path(__file__).parent / "fixtures" / "junit"


def read(path: str, data: bytes | None = None, **kwargs: int) -> JUnitReport:
    report = JUnitReport()
    assert parse_junit(data if data is not None else (FIXTURES / path).read_bytes(), report, name=path, **kwargs)
    return report


def where(t: FailedTest) -> tuple[str, str, str, str]:
    return t.id, t.kind, t.file, t.line


# (fixture, tests, failed, flaky, [(id, kind, file, line) of each failed test, in order])
PRODUCERS = [
    ("pytest/xunit2.xml", 13, 10, 0, [
        ("tests.test_sample.test_long_diff", "failure", "tests/test_sample.py", "12"),
        ("tests.test_sample.test_param[a[1]-1]", "failure", "tests/test_sample.py", "17"),
        # pytest escapes non-ASCII in ids: the name is what it wrote.
        ("tests.test_sample.test_param[\\xfcn\\xefcode \\u2713-2]", "failure", "tests/test_sample.py", "17"),
        ("tests.test_sample.test_param[x::y-3]", "failure", "tests/test_sample.py", "17"),
        ("tests.test_sample.test_error_raised", "failure", "tests/test_sample.py", "21"),
        ("tests.test_sample.test_xpass_strict", "failure", "", ""),
        ("tests.test_sample.test_setup_error", "error", "tests/test_sample.py", "41"),
        ("tests.test_sample.test_teardown_error", "error", "tests/test_sample.py", "47"),
        ("tests.test_sample.test_fail_and_teardown_error", "failure", "tests/test_sample.py", "59"),
        ("tests.test_sample.TestGroup.test_method", "failure", "tests/test_sample.py", "64")]),
    ("pytest/collection-error.xml", 1, 1, 0, [
        ("tests2.test_broken", "error", "tests2/test_broken.py", "1")]),
    ("jest/jest-default.xml", 9, 5, 0, [
        ("math adds big numbers", "failure", "jtest/math.test.js", "4"),
        ("math parse [nested] throws on bad input ✓", "failure", "jtest/math.test.js", "6"),
        ("math parse [nested] parse(2) is 3", "failure", "jtest/math.test.js", "9"),
        ("math deep object", "failure", "jtest/math.test.js", "11"),
        ("top-level failure", "failure", "jtest/other.test.js", "1")]),
    ("jest/jest-file.xml", 10, 6, 0, [
        ("math.adds big numbers", "failure", "jtest/math.test.js", "4"),
        ("math parse [nested].throws on bad input ✓", "failure", "jtest/math.test.js", "6"),
        ("math parse [nested].parse(2) is 3", "failure", "jtest/math.test.js", "9"),
        ("math.deep object", "failure", "jtest/math.test.js", "11"),
        ("jtest/other.test.js::top-level failure", "failure", "jtest/other.test.js", "1"),
        ("Test suite failed to run.jtest/broken.test.js", "error", "jtest/broken.test.js", "1")]),
    ("vitest/vitest.xml", 8, 4, 0, [
        ("vtest/broken.test.js", "failure", "vtest/broken.test.js", "1"),
        ("vtest/math.test.js::math > adds big numbers", "failure", "vtest/math.test.js", "5"),
        ("vtest/math.test.js::math > parse [nested] > throws on bad input ✓", "failure", "vtest/math.test.js", "7"),
        ("vtest/math.test.js::math > parse [nested] > parse(2) is 3", "failure", "vtest/math.test.js", "10")]),
    ("playwright/playwright.xml", 5, 2, 0, [
        ("cart.spec.ts::cart › totals the lines", "failure", "ptest/cart.spec.ts", "8"),
        ("cart.spec.ts::cart › throws", "error", "ptest/cart.spec.ts", "12")]),
    ("mocha/mocha.xml", 5, 4, 0, [
        ("math adds big numbers", "failure", "mtest/math.spec.js", "5"),
        ("math parse [nested] throws on bad input ✓", "failure", "mtest/math.spec.js", "7"),
        ("math parse [nested] deep", "failure", "mtest/math.spec.js", "10"),
        ('math hooks "before all" hook for "never runs"', "failure", "mtest/math.spec.js", "13")]),
    ("mocha/mocha-jenkins.xml", 7, 4, 0, [
        ("math.adds big numbers", "failure", "mtest/math.spec.js", "5"),
        ("math.parse [nested].throws on bad input ✓", "failure", "mtest/math.spec.js", "7"),
        ("math.parse [nested].deep", "failure", "mtest/math.spec.js", "10"),
        ('math.hooks."before all" hook for "never runs"', "failure", "mtest/math.spec.js", "13")]),
    ("mocha/mocha-xunit.xml", 7, 4, 0, [
        ("math.adds big numbers", "failure", "mtest/math.spec.js", "5"),
        ("math parse [nested].throws on bad input ✓", "failure", "mtest/math.spec.js", "7"),
        ("math parse [nested].deep", "failure", "mtest/math.spec.js", "10"),
        ('math hooks."before all" hook for "never runs"', "failure", "mtest/math.spec.js", "13")]),
    ("surefire/TEST-com.acme.billing.InvoiceTest.xml", 8, 4, 1, [
        ("com.acme.billing.InvoiceTest.throwsNpe", "error", "com/acme/billing/InvoiceTest.java", "17"),
        ("com.acme.billing.InvoiceTest.rates(int)[2]", "failure", "com/acme/billing/InvoiceTest.java", "24"),
        ("com.acme.billing.InvoiceTest.totalsLines", "failure", "com/acme/billing/InvoiceTest.java", "11"),
        ("com.acme.billing.InvoiceTest.alwaysFailsOnRerun", "failure", "com/acme/billing/InvoiceTest.java", "33")]),
    ("surefire/TEST-com.acme.billing.BrokenSetupTest.xml", 1, 1, 0, [
        ("com.acme.billing.BrokenSetupTest", "error", "com/acme/billing/BrokenSetupTest.java", "7")]),
    ("published/go-junit-report-001-pass-fail-skip.xml", 5, 1, 0, [
        ("package/fail.TestOne", "failure", "fail_test.go", "6")]),
    ("published/go-junit-report-013-build-failed.xml", 5, 3, 0, [
        ("package/name/failing1.[build failed]", "error", "failing1/failing_test.go", "15"),
        ("package/name/failing2.[build failed]", "error", "failing2/another_failing_test.go", "20"),
        ("package/name/setupfailing1.[setup failed]", "error", "setupfailing1/failing_test.go", "4")]),
    ("published/nextest-basic.xml", 3, 1, 0, [
        ("oxidized_navigation::parry3d.test_failure", "failure", "tests/parry3d.rs", "154")]),
    ("published/catch2-report.xml", 1, 1, 0, [
        ("ut_detail_utility_is_constant_evaluated.is constant evaluated", "failure",
         "test/unit/detail/utility/is_constant_evaluated.cpp", "19")]),
    ("published/bazel-suite-logs.xml", 1, 1, 0, [
        ("bazel/failing_absl_test", "error", "", "")]),
    ("published/multiresult.xml", 4, 2, 0, [
        ("test class.test that errors", "failure", "", ""),
        ("test class.test that fails", "failure", "", "")]),
    ("published/no-attributes.xml", 4, 2, 0, [("?", "failure", "", ""), ("?", "error", "", "")]),
    ("published/with-xml-entities.xml", 4, 2, 0, [
        ("Test with 'apostrophe' in the test name", "failure", "", ""),
        ("Test with & in the test name", "error", "", "")]),
    ("published/reruns-all-failed.xml", 1, 1, 0, [
        ("test_always_fails.TestAlwaysFails.test_always_fails", "failure",
         "/home/runner/work/tests/test_always_fails.py", "10")]),
    ("published/reruns-passed-first.xml", 1, 0, 1, []),
    ("published/marathon-flaky-failure.xml", 1, 0, 1, []),
    ("published/testsuite-in-testsuite.xml", 5, 0, 0, []),
    ("published/xunit-net-bom.xml", 2, 0, 0, []),
]


@pytest.mark.parametrize(("path", "total", "failed", "flaky", "expected"), PRODUCERS, ids=[p[0] for p in PRODUCERS])
def test_each_producer(path: str, total: int, failed: int, flaky: int,
                       expected: list[tuple[str, str, str, str]]) -> None:
    report = read(path)
    assert (report.total, report.failed_count, report.flaky) == (total, failed, flaky)
    assert [where(t) for t in report.failed] == expected
    assert all(t.message for t in report.failed if path != "published/no-attributes.xml")
    assert report.notes == []


def test_messages_and_texts_as_the_runners_wrote_them() -> None:
    jest = read("jest/jest-default.xml").failed
    # jest-junit writes no message attribute: the text's first line is the message.
    assert jest[1].message == 'TypeError: cannot parse <bad> & "worse"'
    assert "Received: 23" in jest[0].text
    mocha = read("mocha/mocha.xml").failed     # CDATA
    assert 'TypeError: cannot parse <bad> & "worse"' in mocha[1].text
    sure = read("surefire/TEST-com.acme.billing.InvoiceTest.xml").failed
    assert sure[0].message == 'Cannot invoke "String.length()" because "s" is null'
    assert "rerunFailure" not in sure[3].text and sure[3].text.count("fails <every> time") == 1
    go = read("published/go-junit-report-001-pass-fail-skip.xml").failed
    assert go[0].text.startswith("    fail_test.go:6: Error message")
    # Bazel writes the test's log as the suite's output after an empty <error>: the failure gets it.
    (bazel,) = read("published/bazel-suite-logs.xml").failed
    assert bazel.text.startswith("(no failure text; the end of the output:)")
    assert "ModuleNotFoundError: No module named 'non_existent_package'" in bazel.text
    assert "Generated test.err" not in bazel.text
    # A failure with its own text is not given the output.
    assert read("published/multiresult.xml").failed[0].text == "Assertion failed\n\nstdout"
    php = read("published/phpunit.xml").failed
    assert php[0].line == "28"
    assert php[0].file.endswith("/targeting-traits-with-coversclass-attribute-is-deprecated.phpt")


def test_dotnet_junit_logger_frames_on_windows() -> None:
    report = read("published/dotnet-junit-testlogger.xml")
    assert (report.total, report.failed_count) == (52, 14)
    tests = {t.id: t for t in report.failed}
    fail = tests["JUnit.Xml.TestLogger.NetFull.Tests.UnitTest1.FailTest11"]
    # "at ...FailTest11() in C:\...\UnitTest1.cs:line 27", and the message's CRLFs
    assert fail.file.endswith("/test/assets/JUnit.Xml.TestLogger.NetCore.Tests/UnitTest1.cs")
    assert (fail.line, fail.message) == ("27", "Expected: False\r\n  But was:  True")
    assert "\r" not in tests["JUnit.Xml.TestLogger.NetFull.Tests.FailingTearDown.TestC"].text
    assert tests["JUnit.Xml.TestLogger.NetFull.Tests.FailingTearDown.TestC"].line == "182"


def test_pytest_xunit1_keeps_its_file_and_line_and_says_where_it_failed() -> None:
    tests = {t.name: t for t in read("pytest/xunit1.xml").failed}
    diff = tests["test_long_diff"]
    # xunit1's line is the test's own `def` (pytest wrote 7, counting from 0; the failure text's
    # `def` is 4 lines above the crash line's 12); the crash line is where it failed.
    assert (diff.file, diff.line, diff.failed_at) == ("tests/test_sample.py", "8", "tests/test_sample.py:12")
    both = tests["test_fail_and_teardown_error"]   # written twice: a failure, then a teardown error
    assert both.attempts == 2 and "assert 1 == 2" in both.text and "teardown exploded" in both.text
    assert "test_skipped" not in tests and "test_xfail" not in tests


def test_pytest_xunit1_line_is_shown_counting_from_one() -> None:
    # A real report beside the module it ran: each failed test's line is its `def`'s own.
    source = (FIXTURES / "pytest/xunit1_lines_source.py.txt").read_text().split("\n")
    raw = (FIXTURES / "pytest/xunit1_lines.xml").read_text()
    assert 'name="test_dicts" file="test_big.py" line="7"' in raw  # as pytest wrote it
    tests = read("pytest/xunit1_lines.xml").failed
    assert [(t.name, t.line) for t in tests] == [("test_dicts", "8"), ("test_lists", "16"),
                                                 ("test_strings", "20"), ("test_dict", "27")]
    for t in tests:
        assert source[int(t.line) - 1].lstrip().startswith(f"def {t.name}(")


def test_a_line_from_another_producer_is_kept_as_written() -> None:
    xml = (b'<testsuites name="tests"><testsuite name="acme"><testcase classname="a" name="t" file="a.py"'
           b' line="7"><failure message="boom">boom</failure></testcase></testsuite></testsuites>')
    assert read("other.xml", xml).failed[0].line == "7"
    # pytest with its own junit_suite_name: the root's "pytest tests" still says who wrote it.
    renamed = xml.replace(b'name="tests"', b'name="pytest tests"')
    assert read("renamed.xml", renamed).failed[0].line == "8"


def test_a_long_diff_is_kept_whole_up_to_the_cap() -> None:
    diff = read("pytest/xunit2.xml").failed[0]
    assert len(diff.text) > 10_000 and diff.text.endswith("tests/test_sample.py:12: AssertionError")
    small = bytearray((FIXTURES / "pytest/xunit2.xml").read_bytes())
    huge = bytes(small).replace(b"def test_long_diff():", b"def test_long_diff():" + b"x" * 200_000, 1)
    cut = read("big.xml", huge).failed[0]
    assert len(cut.text) < 60_000 and "characters cut ..." in cut.text
    assert cut.text.endswith("tests/test_sample.py:12: AssertionError")   # the tail stays


def test_encodings_a_bom_and_characters_xml_forbids() -> None:
    sure = (FIXTURES / "surefire/TEST-com.acme.billing.InvoiceTest.xml").read_text()
    latin = sure.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"').replace("total of lines", "total réel")
    assert read("latin1.xml", latin.encode("latin-1")).failed[2].message.startswith("total réel ==>")
    py = (FIXTURES / "pytest/xunit2.xml").read_bytes()
    assert read("bom.xml", b"\xef\xbb\xbf" + py).failed_count == 10
    utf16 = py.decode().replace('encoding="utf-8"', 'encoding="utf-16"').encode("utf-16")
    assert read("utf16.xml", utf16).failed_count == 10
    # A raw colour code (XML 1.0 forbids ESC) and a byte that is not UTF-8: read again, cleaned.
    jest = (FIXTURES / "jest/jest-default.xml").read_bytes()
    coloured = read("c.xml", jest.replace(b"Expected: 22", b"Expected: \x1b[32m22\x1b[39m"))
    assert coloured.failed_count == 5 and "Expected: 22\n" in coloured.failed[0].text
    assert coloured.notes == ["c.xml: characters XML does not allow were replaced"]
    assert read("b.xml", jest.replace(b"Expected: 22", b"Expected: \xff22")).failed_count == 5
    # An encoding expat lacks (multi-byte) is decoded by Python; a Latin-1 file with a colour code
    # keeps its accents when read the second time.
    sjis = latin.replace('encoding="ISO-8859-1"', 'encoding="Shift_JIS"').replace("total réel", "合計")
    assert read("sjis.xml", sjis.encode("shift_jis")).failed[2].message.startswith("合計 ==>")
    red = latin.replace("total réel", "total réel \x1b[31m")
    assert read("red.xml", red.encode("latin-1")).failed[2].message.startswith("total réel  ==>")


@pytest.mark.parametrize("shift", range(6))
def test_a_colour_code_across_the_read_boundary_goes_whole(shift: int) -> None:
    # The second reading goes in 256 KB chunks; ESC [ 3 1 m may straddle one.
    head = '<testsuites><testsuite name="s"><testcase classname="a" name="b"><failure message="m">'
    pad = "x" * (256 * 1024 - len(head) - shift - 2)
    doc = head + pad + "\x1b[31mRED\x1b[0m</failure></testcase></testsuite></testsuites>"
    text = read("c.xml", doc.encode()).failed[0].text
    assert text.endswith("xRED") and "?" not in text


def test_a_report_cut_short_keeps_what_came_before() -> None:
    data = (FIXTURES / "vitest/vitest.xml").read_bytes()
    report = read("vitest.xml", data[: len(data) * 2 // 3])
    assert [t.id for t in report.failed] == ["vtest/broken.test.js", "vtest/math.test.js::math > adds big numbers"]
    assert report.notes[0].startswith("vitest.xml ends early (no element found")


def test_cases_right_under_testsuites() -> None:
    report = read("flat.xml", b'<testsuites><testcase classname="a.B" name="c"><error message="e"/></testcase>'
                              b'<testcase classname="a.B" name="d"/></testsuites>')
    assert (report.total, [t.id for t in report.failed]) == (2, ["a.B.c"])


def test_not_junit_and_not_xml() -> None:
    assert not parse_junit(b'<?xml version="1.0"?><coverage line-rate="0.9"><packages/></coverage>', JUnitReport())
    assert not parse_junit(b"<testcase name='x'><failure/></testcase>", JUnitReport())
    with pytest.raises(SyntaxError):  # ET.ParseError
        parse_junit(b"2 failed, 212 passed", JUnitReport())


def big_report(mb: int) -> bytes:
    """A report of `mb` MB: passing tests, and one failure near the start and one at the end."""
    case = b'<testcase classname="tests.test_many" name="test_%d" time="0.001"><system-out>ok</system-out></testcase>\n'
    fail = (b'<testcase classname="tests.test_many" name="test_bad_%d"><failure message="boom">'
            b'tests/test_many.py:%d: AssertionError</failure></testcase>\n')
    parts = [b'<?xml version="1.0" encoding="UTF-8"?><testsuites><testsuite name="pytest">\n', fail % (0, 1)]
    n = size = 0
    while size < mb * 1024 * 1024:
        parts.append(case % n)
        size += len(parts[-1])
        n += 1
    parts += [fail % (1, 2), b"</testsuite></testsuites>\n"]
    return b"".join(parts)


def test_a_huge_report_is_streamed_from_the_zip_and_capped() -> None:
    data = big_report(24)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("reports/junit.xml", data)
    archive = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    info = archive.infolist()[0]
    del data
    tracemalloc.start()
    try:
        report = JUnitReport()
        assert parse_junit(lambda: archive.open(info), report, name=info.filename)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.failed_count == 2 and report.total > 200_000
    # ElementTree held ~4x the file (~100 MB); now the set of 230,000 test keys is most of ~19 MB.
    assert peak < 32 * 1024 * 1024, f"{peak:,} bytes held to read a 24 MB report"
    capped = JUnitReport()
    assert parse_junit(lambda: archive.open(info), capped, name="junit.xml", max_bytes=1024 * 1024)
    assert [t.name for t in capped.failed] == ["test_bad_0"]
    assert capped.notes[0] == "junit.xml: only its first 1,048,576 bytes were read"


def test_failures_beyond_the_cap_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cardloop.integrations.sources.junit.MAX_FAILED", 2)
    report = read("mocha/mocha.xml")
    assert (len(report.failed), report.more_failed, report.failed_count) == (2, 2, 4)


def zip_of(paths: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path in paths:
            z.write(FIXTURES / path, f"reports/{path}")
    return buf.getvalue()


def test_github_tests_reads_real_runners_reports(fake: FakeGitHub, client: GitHubClient,
                                                 counter: TokenCounter) -> None:
    seed_tests(fake)
    data = zip_of(["jest/jest-file.xml", "surefire/TEST-com.acme.billing.InvoiceTest.xml",
                   "published/go-junit-report-013-build-failed.xml", "pytest/xunit1.xml"])
    fake.zips[4001] = data
    fake.artifacts[3001][0] = fake.artifact_json(REPO, 3001, 4001, "test-reports", len(data))
    result = GitHubTestResultsSource(client, count=counter.count, excerpt_tokens=20_000).gather(
        req(card(), Stage.TESTING))
    (item,) = result.items
    assert item.title == "Tests: 23 failed of 36"
    assert "artifact test-reports: 23 failed of 36 in 4 JUnit file(s) (1 passed on a rerun)" in result.notes
    c = item.content
    assert "math.adds big numbers [failure]\n   at jtest/math.test.js:4\n" in c
    assert "com.acme.billing.InvoiceTest.throwsNpe [error]\n   at com/acme/billing/InvoiceTest.java:17\n" in c
    assert "package/name/failing1.[build failed] [error]\n   at failing1/failing_test.go:15\n" in c
    assert ("tests.test_sample.test_long_diff [failure]\n   at tests/test_sample.py:8; "
            "failed at tests/test_sample.py:12\n") in c
    assert "test_fail_and_teardown_error [failure, reported 2 times]" in c
    assert "flakyPassesOnRerun" not in c and "test_skipped" not in c


def test_github_tests_folds_the_runners_own_frames(fake: FakeGitHub, client: GitHubClient,
                                                   counter: TokenCounter) -> None:
    seed_tests(fake)
    data = zip_of(["jest/jest-default.xml"])
    fake.zips[4001] = data
    fake.artifacts[3001][0] = fake.artifact_json(REPO, 3001, 4001, "jest", len(data))
    result = GitHubTestResultsSource(client, count=counter.count).gather(req(card(), Stage.TESTING))
    c = result.items[0].content
    # jest-circus's frames and "new Promise (<anonymous>)" fold into one line; the test's stays.
    assert ("   |     at Object.toBe (/home/runner/work/shop/shop/jtest/math.test.js:4:55)\n"
            "   |     [... 15 library frame(s) ...]\n") in c
    assert "jestAdapterInit.js" not in c
    assert "jestAdapterInit.js" in result.blobs["github_tests/4001.txt"]   # the stored report is whole


def test_github_tests_reads_an_artifact_up_to_its_budget(fake: FakeGitHub, client: GitHubClient,
                                                         counter: TokenCounter) -> None:
    seed_tests(fake)
    files = ["mocha/mocha.xml", "vitest/vitest.xml", "surefire/TEST-com.acme.billing.InvoiceTest.xml"]
    data = zip_of(files)
    fake.zips[4001] = data
    fake.artifacts[3001][0] = fake.artifact_json(REPO, 3001, 4001, "test-reports", len(data))
    first = (FIXTURES / files[0]).stat().st_size
    result = GitHubTestResultsSource(client, count=counter.count, max_xml_bytes=first + 100).gather(
        req(card(), Stage.TESTING))
    # mocha.xml whole, then vitest.xml's first 100 bytes (a note: cut short), then nothing.
    assert "artifact test-reports: 1 more XML file(s) not read (the " in " ".join(result.notes)
    assert "artifact test-reports: 4 failed of 5 in 1 JUnit file(s)" in result.notes


def test_a_long_assertion_diff_shows_what_differs_not_only_its_last_lines() -> None:
    # pytest -vv's dict diff is 330 E lines: the block shows its first lines, what the
    # explanation says differs, the first changed lines of the full diff and the crash line.
    from cardloop.integrations.sources.github.failed_tests import _failure_block
    from cardloop.prompts.logs import find_error_lines

    dicts, lists, _, unit = read("pytest/xunit1_lines.xml").failed
    block = _failure_block(1, dicts, 12)
    assert "   at test_big.py:8; failed at test_big.py:13" in block
    assert "| E       AssertionError: assert {'key_000'" in block
    assert "| E         Differing items:" in block
    assert "{'key_017': {'value': 17, 'tags': ['t17', 'u17']}} != {'key_017': {'value': 999" in block
    assert "| E         Left contains 1 more item:" in block
    assert "| E         -         'value': 999," in block
    assert block.endswith("| test_big.py:13: AssertionError")
    assert "lines cut ...]" in block and len(block.split("\n")) < 45
    assert "At index 30 diff: 'item-30' != 'item-31'" in _failure_block(2, lists, 12)
    assert "| E       +  'key_010': {'tags': ['t10', 'u10'], 'value': -1}," in _failure_block(4, unit, 12)
    # A failure with few error lines after its first ones shows them all, as before.
    for t in read("pytest/xunit1.xml").failed:
        lines = t.text.split("\n")
        later = [k for k in find_error_lines(lines) if k >= 12]
        if len(later) <= 6:
            block = _failure_block(1, t, 12)
            assert all(f"| {lines[k][:200]}" in block for k in later), t.name


# --- where a test failed, on adversarial failure texts: linear, not quadratic ----------------


@pytest.mark.parametrize("family", ["blank lines", "') in ' on one line"])
def test_failure_texts_cost_failed_at_in_about_their_length(family: str) -> None:
    """`^\\s*` walked every line start of a run of blank lines to its end (8,000 newlines:
    2.4 s), and each ") in " of a .NET-looking line was tried to the line's end (16,000
    characters: 0.57 s)."""
    from cardloop.integrations.sources.junit_where import failed_at_in

    text = "\n" * 16_000 if family == "blank lines" else "  at A.b(" + ") in " * 3_200
    plain = "x\n" * 8_000 if family == "blank lines" else "  at A.b(" + "x in " * 3_200
    assert len(text) == len(plain)
    took = cpu_best(lambda t: failed_at_in(t, "A"), text, reps=3)
    # Same length: linear, about the same time; before, hundreds of times more.
    assert took <= 10 * max(cpu_best(lambda t: failed_at_in(t, "A"), plain, reps=3), 0.002)


def test_frames_after_blank_lines_are_still_found() -> None:
    from cardloop.integrations.sources.junit_where import failed_at_in

    assert failed_at_in("boom\n\n  \n    at Ns.FooTests.Bar() in C:\\src\\FooTests.cs:line 27\n", "Ns") \
        == "C:\\src\\FooTests.cs:27"
    assert failed_at_in("Error\n\n\n\tat com.acme.FooTest.bar(FooTest.java:17)", "com.acme.FooTest") \
        == "com/acme/FooTest.java:17"
    assert failed_at_in("\n\n   x_test.go:6: bad\n", "") == "x_test.go:6"
    assert failed_at_in("\n\n    at Object.<anonymous> (src/a.test.js:3:9)\n", "") == "src/a.test.js:3"
