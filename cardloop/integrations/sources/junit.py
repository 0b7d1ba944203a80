"""JUnit XML as real test runners write it: failed test cases with where they failed.

One reader for every common producer (fixtures in tests/.../fixtures/junit/ name them): pytest
(xunit1/xunit2), jest-junit, vitest, mocha (mocha-junit-reporter, xunit), Maven Surefire and
Gradle, go-junit-report, gotestsum, PHPUnit, Bazel. Their differences, all handled here:

- where the file is: a `file` attribute on the case (pytest xunit1, PHPUnit) or on a suite
  (mocha-junit-reporter), the classname (vitest), or only in the failure text (pytest's crash
  line, JavaScript stack frames, Java frames, Go's `x_test.go:12:` lines);
- the message: a `message` attribute, or only text (jest-junit, mocha's xunit reporter);
- repeats: one case written once per attempt (pytest-rerunfailures, or pytest's failure plus
  teardown error) is one test, failed only when no attempt passed; Surefire's `flakyFailure`
  (passed on rerun) is not a failure, `rerunFailure` after a `failure` still is;
- nesting: `testsuite` inside `testsuite` (PHPUnit, Bazel), a root `testsuite` or `testsuites`.

The document is read as a stream (artifacts are untrusted and may be huge): elements are freed
as soon as they are read, at most `max_bytes` of a file are parsed, failure texts are capped and
at most MAX_FAILED failures are kept (the rest counted). A document cut short (a runner killed
mid-write) keeps the cases read before the cut. Control characters that XML forbids (colour
codes some runners write raw) and bytes that are not the declared UTF-8 make expat stop: the
document is then read once more with those replaced. expat fetches no external entities and
refuses entity-expansion bombs.

    junit.py        FailedTest, JUnitReport, parse_junit: attempts merged into tests
    junit_read.py   the stream: expat's callbacks, caps, the second reading with bad characters replaced
    junit_where.py  where a test failed, from its failure text; CI checkout paths made relative
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from cardloop.integrations.sources.junit_read import (
    MAX_BYTES,
    MAX_MESSAGE,
    MAX_TEXT,
    Case,
    Reader,
    Source,
    cap,
    is_bad_char,
    read,
)
from cardloop.integrations.sources.junit_where import SOURCE_FILE, failed_at_in, relative

MAX_FAILED = 1000          # failed tests kept per report; more are only counted


@dataclass(frozen=True)
class FailedTest:
    classname: str
    name: str
    kind: str  # "failure" or "error"
    message: str
    text: str
    file: str = ""
    line: str = ""
    failed_at: str = ""  # "path:line" the failure text names as where it failed, when it does
    attempts: int = 1    # how often the report names it, failed each time (reruns; pytest's teardown error)

    @property
    def id(self) -> str:
        if not self.classname or self.classname == self.name:
            return self.name
        if self.name.startswith(self.classname) or self.name.endswith(self.classname):
            return self.name  # jest-junit, mocha-junit-reporter: the name is already the full title
        if SOURCE_FILE.search(self.classname):
            return f"{self.classname}::{self.name}"  # vitest: the classname is the test file
        return f"{self.classname}.{self.name}"


@dataclass
class JUnitReport:
    total: int = 0
    failed: list[FailedTest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    more_failed: int = 0   # failed tests beyond MAX_FAILED, counted only
    flaky: int = 0         # tests that failed and then passed on a rerun: not failed
    notes: list[str] = field(default_factory=list)

    @property
    def failed_count(self) -> int:
        return len(self.failed) + self.more_failed


def parse_junit(xml: Source, report: JUnitReport, *, name: str = "", max_bytes: int = MAX_BYTES) -> bool:
    """Add one JUnit XML document's test cases to `report`; False when it is not JUnit.

    `xml` is the document or a function that opens it (a zip member: read as a stream, and
    opened again if it must be read a second time). Raises ET.ParseError when it is not XML at
    all; a document cut short after its first test cases keeps them and adds a note."""
    try:
        reader = read(xml, max_bytes, sanitize=False, notes=report.notes, name=name)
    except (ET.ParseError, ValueError) as exc:
        # ValueError: "multi-byte encodings are not supported" (Shift_JIS, GBK): Python decodes them.
        if not (is_bad_char(exc) if isinstance(exc, ET.ParseError) else "encoding" in str(exc)):
            raise
        reader = read(xml, max_bytes, sanitize=True, notes=report.notes, name=name)
        if isinstance(exc, ET.ParseError):
            report.notes.append(f"{name or 'a JUnit file'}: characters XML does not allow were replaced")
    if reader is None:
        return False
    _merge_into(reader, report)
    return True


def _merge_into(reader: Reader, report: JUnitReport) -> None:
    """One test per key of this document: a test failed when none of its attempts passed."""
    report.total += reader.total
    report.flaky += reader.flaky
    for key, failing in reader.failing.items():
        if key in reader.passed:
            report.flaky += 1  # it passed in one attempt (a rerun): not a failure
        elif len(report.failed) >= MAX_FAILED:
            report.more_failed += 1
        else:
            first = failing[0]
            report.failed.append(_failed_test(first.classname, first.name, first.file, failing))


def _failed_test(classname: str, name: str, file: str, failing: list[Case]) -> FailedTest:
    bad = [b for c in failing for b in c.bad]
    # The first in the document leads: pytest's failure before its teardown error, jest-junit's
    # "Test suite failed to run" error before the raw error object it adds as a failure.
    kind, message, first_text = bad[0]
    text = "\n\n".join(t for _, _, t in bad if t)
    failed_at = relative(failed_at_in(first_text, classname))
    line = failing[0].line
    if not file:
        file = next((f for f in (classname, name) if SOURCE_FILE.search(f)), "")  # vitest, jest suites
    file = relative(file)
    at_path, _, at_line = failed_at.rpartition(":")
    if not file:
        file, line = at_path, at_line
    elif not line and at_path and (at_path == file or at_path.endswith("/" + file.lstrip("./"))):
        # jest-junit's `file` has no line; the stack frame in that file has it. Playwright's
        # classname is the file from its testDir; the frame's path, from the checkout, is longer.
        if not at_path.startswith("/") and ":" not in at_path:
            file = at_path
        line, failed_at = at_line, f"{file}:{at_line}"
    return FailedTest(classname=classname, name=name or classname or "?", kind=kind,
                      message=message or _first_line(first_text), text=cap(text, MAX_TEXT), file=file,
                      line=line, failed_at=failed_at, attempts=len(failing))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.split("\n") if line.strip()), "")[:MAX_MESSAGE]
