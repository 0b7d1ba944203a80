"""Reading one JUnit XML document as a stream: expat's callbacks straight into the failed
attempts of each test and the keys of all the others, no element tree (junit.py says why)."""

from __future__ import annotations

import codecs
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO
from xml.parsers import expat

MAX_TEXT = 48_000          # characters of one failure's text kept (head and tail)
MAX_MESSAGE = 4_000
MAX_BYTES = 64 * 1024 * 1024   # of one XML file parsed; the rest is not read
_CHUNK = 256 * 1024

Source = bytes | Callable[[], BinaryIO]


@dataclass
class Case:
    classname: str
    name: str
    file: str
    line: str
    bad: list[tuple[str, str, str]]  # (kind, message, text) of each failure/error child


def read(xml: Source, max_bytes: int, *, sanitize: bool, notes: list[str], name: str) -> Reader | None:
    stream = io.BytesIO(xml) if isinstance(xml, bytes | bytearray) else xml()
    with stream:
        chunks = _chunks(stream, max_bytes, notes, name)
        if sanitize:
            chunks = _sanitized(chunks)
        return _cases(chunks, notes, name)


def _chunks(stream: BinaryIO, max_bytes: int, notes: list[str], name: str) -> Iterator[bytes]:
    read = 0
    while read < max_bytes:
        chunk = stream.read(min(_CHUNK, max_bytes - read))
        if not chunk:
            return
        read += len(chunk)
        yield chunk
    if stream.read(1):
        notes.append(f"{name or 'a JUnit file'}: only its first {max_bytes:,} bytes were read")


class _NotJUnit(Exception):
    pass


class Reader:
    """expat's callbacks straight into failing attempts and test keys: no element tree at all
    (ElementTree's pull parser cost about 4x as much on a 50 MB report of passing tests), and
    nothing kept of a passing test but its key."""

    def __init__(self, parser: expat.XMLParserType) -> None:
        # Text is only wanted inside a failure or a wanted output: expat is given the handler
        # then and only then (it builds no string for the whitespace between 250,000 cases).
        self.parser = parser
        # A test's key is a hash of what names it: 250,000 tests cost ~15 MB, not the ~60 MB of
        # their names (two of one report's tests sharing a 64-bit hash is not worth that memory).
        self.failing: dict[int | tuple[str, int], list[Case]] = {}   # a test's failed attempts
        self.keys: set[int] = set()                                    # every named test's key
        self.passed: set[int] = set()      # failing tests with an attempt that passed
        self.skipped_keys: set[int] = set()
        self.flaky = 0          # Surefire's flakyFailure: failed, then passed on a rerun
        self.tags: list[str] = []                    # the open elements' local names, root first
        self.suites: list[tuple[str, str]] = []      # (name, file) in effect in each open testsuite
        self.attrs: dict[str, str] | None = None     # of the open testcase
        self.bad_list: list[tuple[str, str, str]] = []
        self.skipped = False
        self.bad: tuple[str, str] | None = None      # (kind, message) of the failure being read
        self.bad_depth = 0
        self.text = _Text()
        self.unnamed = 0
        # A failure without a text (Bazel's "exited with error code 1") gets the output its case
        # or suite wrote: system-out/err read only while such a failure waits for it.
        self.out: _Text | None = None
        self.out_depth = 0
        self.pending: list[list[Case]] = []         # per open testsuite: its failures without text
        self.root_name = ""                          # of the root element: "pytest tests" for pytest

    @property
    def total(self) -> int:
        return len(self.keys) + self.unnamed

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if ":" in tag:
            tag = tag.rpartition(":")[2]  # a prefixed root (j:testsuite) is JUnit all the same
        tags = self.tags
        parent = tags[-1] if tags else None
        tags.append(tag)
        if parent is None and tag not in ("testsuites", "testsuite"):
            raise _NotJUnit  # coverage.xml, a checkstyle report...: not ours
        if parent is None:
            self.root_name = attrs.get("name") or ""
        if self.bad is not None:
            return  # inside a failure: its text is all that matters
        if tag == "testcase":
            self.attrs, self.bad_list, self.skipped = attrs, [], False
        elif parent == "testcase":
            if self.attrs is None:
                return
            if tag in ("failure", "error"):
                self._open_bad(tag, attrs)
            elif tag == "skipped":
                self.skipped = True
            elif tag in ("flakyFailure", "flakyError"):
                self.flaky += 1
            elif tag in _OUTPUT and self.bad_list and not any(t for _, _, t in self.bad_list):
                self._open_out()
        elif tag == "testsuite":
            outer_name, outer_file = self.suites[-1] if self.suites else ("", "")
            self.suites.append((attrs.get("name") or outer_name, attrs.get("file") or outer_file))
            self.pending.append([])
        elif parent == "testsuite" and tag in ("failure", "error"):
            self._open_bad(tag, attrs)  # a suite-level failure (a class that could not start)
        elif parent == "testsuite" and tag in _OUTPUT and self.pending and self.pending[-1]:
            self._open_out()

    def _open_bad(self, tag: str, attrs: dict[str, str]) -> None:
        self.bad, self.bad_depth = (tag, (attrs.get("message") or "").strip()[:MAX_MESSAGE]), len(self.tags)
        self.text = _Text()
        self.parser.CharacterDataHandler = self.data
        if self.attrs is not None and attrs.get("file") and not self.attrs.get("file"):
            # Catch2 puts the file and line on the failure, not on the case.
            self.attrs["file"], self.attrs["line"] = attrs["file"], attrs.get("line") or ""

    def _open_out(self) -> None:
        self.out, self.out_depth = _Text(), len(self.tags)
        self.parser.CharacterDataHandler = self.data

    def end(self, tag: str) -> None:
        depth = len(self.tags)
        tag = self.tags.pop()
        if self.bad is not None:
            if depth == self.bad_depth:
                bad = (self.bad[0], self.bad[1], self.text.value())
                self.bad = None
                self.parser.CharacterDataHandler = None
                if self.attrs is not None:
                    self.bad_list.append(bad)
                else:
                    suite_name, suite_file = self.suites[-1]
                    self._add(suite_name, suite_name, suite_file, "", [bad], skipped=False)
        elif self.out is not None and depth == self.out_depth:
            output, self.out = self.out.value()[-_OUTPUT_TAIL:], None
            self.parser.CharacterDataHandler = None
            if output and self.attrs is not None:
                self.bad_list = _with_output(self.bad_list, output)
            elif output and self.pending:
                for case in self.pending[-1]:
                    case.bad = _with_output(case.bad, output)
                self.pending[-1] = []
        elif tag == "testcase" and self.attrs is not None:
            a, self.attrs = self.attrs, None
            self._add(a.get("classname") or a.get("class") or "", a.get("name") or "", a.get("file") or "",
                      a.get("line") or "", self.bad_list, skipped=self.skipped)
        elif tag == "testsuite" and self.suites:
            self.suites.pop()
            self.pending.pop()

    def _add(self, classname: str, name: str, file: str, line: str, bad: list[tuple[str, str, str]], *,
             skipped: bool) -> None:
        suite_name, suite_file = self.suites[-1] if self.suites else ("", "")  # a case right under testsuites
        # Attempts of one test share a key; cases without a name are each a test of their own.
        key: int | tuple[str, int]
        if not name:
            self.unnamed += 1
            key = ("", self.unnamed)
        else:
            key = hash((classname, name, file, suite_name))
            seen = key in self.keys
            self.keys.add(key)
            # Only a test that failed somewhere is kept whole; "passed in another attempt" is
            # all that matters of the others, and a passing attempt before the first failure
            # is one that was seen, not skipped, and not failing.
            passed_before = bad and seen and key not in self.failing and key not in self.skipped_keys
            passes_now = not bad and not skipped and key in self.failing
            if passed_before or passes_now:
                self.passed.add(key)
            if skipped and not bad:
                self.skipped_keys.add(key)
        if bad:
            if line.isdigit() and (suite_name == "pytest" or self.root_name == "pytest tests"):
                # pytest's xunit1 `line` counts from 0 (the line above the `def`); editors and
                # the crash line count from 1.
                line = str(int(line) + 1)
            case = new_case(classname, name, file or suite_file, line, suite_name, bad)
            self.failing.setdefault(key, []).append(case)
            if self.pending and not any(t for _, _, t in bad):
                self.pending[-1].append(case)

    def data(self, text: str) -> None:
        if self.bad is not None:
            self.text.add(text)
        elif self.out is not None:
            self.out.add(text)


_OUTPUT = ("system-out", "system-err")
_OUTPUT_TAIL = 4000   # characters of a case's or suite's output given to a failure without text


def _with_output(bad: list[tuple[str, str, str]], output: str) -> list[tuple[str, str, str]]:
    return [(kind, message, text or f"(no failure text; the end of the output:)\n{output}")
            for kind, message, text in bad]


class _Text:
    """A failure's text, its head and tail kept when it is huge (a 30 MB diff)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.cut = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > 4 * MAX_TEXT:
            whole = "".join(self.parts)
            head, tail = whole[: MAX_TEXT * 2 // 3], whole[-(MAX_TEXT // 3):]
            self.cut += len(whole) - len(head) - len(tail)
            self.parts, self.size = [head, tail], len(head) + len(tail)

    def value(self) -> str:
        whole = "".join(self.parts)
        if self.cut:
            head, tail = whole[: MAX_TEXT * 2 // 3], whole[MAX_TEXT * 2 // 3:]
            whole = f"{head}\n[... {self.cut:,} characters cut ...]\n{tail}"
        return cap(whole.replace("\r\n", "\n").strip("\n").rstrip(), MAX_TEXT)


def _cases(chunks: Iterator[bytes], notes: list[str], name: str) -> Reader | None:
    parser = expat.ParserCreate()
    # No DTD's parameter entities; expat resolves no external entity without a handler and
    # refuses entity-expansion bombs itself.
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    reader = Reader(parser)
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    try:
        for chunk in chunks:
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except _NotJUnit:
        return None
    except expat.ExpatError as exc:
        if not reader.total or is_bad_char(exc):
            error = ET.ParseError(str(exc))
            error.code = exc.code
            raise error from None
        notes.append(f"{name or 'a JUnit file'} ends early ({exc}): the {reader.total} test(s) "
                            "before that were read")
    return reader


def new_case(classname: str, name: str, file: str, line: str, suite_name: str,
              bad: list[tuple[str, str, str]]) -> Case:
    classname = classname.strip()
    if not classname and suite_name not in _RUNNER_SUITES:
        classname = suite_name  # gotestsum's TestMain, jest-junit's top-level tests: the suite says where
    return Case(classname, name.strip(), file, line, bad)


# Suite names that are a runner's, not a place: no classname for a case that lacks one.
_RUNNER_SUITES = frozenset({"", "pytest", "Mocha Tests", "Root Suite", "jest tests", "vitest tests", "undefined"})


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    return f"{head}\n[... {len(text) - len(head) - len(tail):,} characters cut ...]\n{tail}"


def is_bad_char(exc: ET.ParseError | expat.ExpatError) -> bool:
    # expat's codes: 4 invalid token (a raw control character, a byte that is not UTF-8),
    # 14 reference to invalid character number (&#x1b;).
    return getattr(exc, "code", 0) in (4, 14)


_BAD_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]|&#(?:x0*(?:[0-8bcef]|1[0-9a-f])|"
                        r"0*(?:[0-8]|1[12]|1[4-9]|2[0-9]|3[01]));", re.I)


_COLOUR = re.compile(r"(?:\x1b|&#x0*1b;|&#0*27;)\[[0-9;]*[A-Za-z]", re.I)  # what `ls --color` writes


def _sanitized(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The document as UTF-8 with what XML forbids replaced (U+FFFD for bytes its declared
    encoding does not have, "?" for control characters and references to them, colour codes
    dropped); its declaration then says UTF-8. Also how an encoding expat lacks is read."""
    decoder: codecs.IncrementalDecoder | None = None
    carry = ""
    for chunk in chunks:
        if decoder is None:
            decoder = codecs.getincrementaldecoder(_declared(chunk))(errors="replace")
            text = re.sub(r"\A(\ufeff?<\?xml[^>]*?)encoding=[\"'][^\"']*[\"']", r"\1encoding='utf-8'",
                          decoder.decode(chunk))
        else:
            text = carry + decoder.decode(chunk)
        # A reference or a colour code cut in two by the chunk boundary waits for the next chunk.
        cut = max(text.rfind("&", len(text) - 16), text.rfind("\x1b", len(text) - 16))
        whole = cut < 0 or (";" in text[cut:] if text[cut] == "&" else bool(_COLOUR.match(text, cut)))
        carry, text = ("", text) if whole else (text[cut:], text[:cut])
        yield _clean(text).encode("utf-8")
    if decoder is not None:
        yield _clean(carry + decoder.decode(b"", final=True)).encode("utf-8")


def _declared(head: bytes) -> str:
    found = re.match(rb"\A(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding=[\"']([A-Za-z0-9._-]+)[\"']", head)
    try:
        return codecs.lookup(found.group(1).decode()).name if found else "utf-8"
    except LookupError:
        return "utf-8"


def _clean(text: str) -> str:
    return _BAD_CHARS.sub("?", _COLOUR.sub("", text))  # colour codes go whole, not as "?[31m"
