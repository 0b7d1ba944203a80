"""Where a failed test failed, from what its JUnit producer wrote: the failure text's crash
line or stack frames (pytest, JavaScript, Java, Rust, Go, PHP), and paths under a CI checkout
made relative to the repository."""

from __future__ import annotations

import re

# pytest's crash line, the last of its report: "tests/test_x.py:12: AssertionError"
_PYTEST_CRASH = re.compile(r"^([^\s:][^:\n]*\.py):(\d+): [A-Za-z_][\w.]*[ \t]*(?=\n|\Z)", re.M)
# pytest's traceback entries: "tests/test_x.py:1: in <module>"
_PYTEST_ENTRY = re.compile(r"^([^\s:][^:\n]*\.py):(\d+): in ", re.M)
# Frames start `^[^\S\n]*`, not `^\s*`: a frame's first character is never whitespace, so only
# the last line start before it can begin the same match; `^\s*` walked every line start of a
# run of blank lines to the run's end (8,000 newlines took 1.5 s).
# JavaScript: "at fn (path:12:3)", "at path:12:3", vitest's "❯ path:12:3" or "❯ fn path:12:3"
_JS_FRAME = re.compile(r"^[^\S\n]*(?:at (?:.*? \()?|❯ (?:\S+ )?)((?:[A-Za-z]:)?[^\s():]+\.[cm]?[jt]sx?):(\d+):\d+\)?"
                       r"[ \t]*(?=\n|\Z)", re.M)
# Java/Kotlin frames: "at com.acme.FooTest.bar(FooTest.java:17)"
_JAVA_FRAME = re.compile(r"^[^\S\n]*at ([\w$.]+)\.[\w$<>]+\(([\w$]+\.(?:java|kt|groovy|scala)):(\d+)\)", re.M)
# Go: "    fail_test.go:6: message", build errors "pkg/x_test.go:5:2: ..."
_GO_LINE = re.compile(r"^[^\S\n]*([\w./-]+\.go):(\d+)(?::\d+)?: ", re.M)
# .NET (JunitXml.TestLogger): "at Ns.FooTests.Bar() in C:\src\FooTests.cs:line 27". The first
# ") in " is the only one that can match (a later one needs a ".cs:line" the first would take
# too), so it is atomic: trying each ") in " of a line to the line's end was quadratic.
_DOTNET_FRAME = re.compile(r"^[^\S\n]*at ([\w.`+<>]+)\.[\w`<>]+\((?>.*?\) in )(.+?\.(?:cs|fs|vb)):line (\d+)", re.M)
# Rust (cargo test, nextest): "thread 'x' panicked at tests/nav.rs:154:5:"
_RUST_PANIC = re.compile(r"panicked at ([^\s:]+\.rs):(\d+):\d+")
# PHPUnit's trace: "/path/tests/FooTest.php:28" lines, the test's own first
_PHP_FRAME = re.compile(r"^((?:[A-Za-z]:)?[^\s:]+\.phpt?):(\d+)[ \t]*(?=\n|\Z)", re.M)
SOURCE_FILE = re.compile(r"\.(?:[cm]?[jt]sx?|py|rb|php|phpt|go|java|kt|cs|rs|swift|scala|ex|exs)\Z")


def failed_at_in(text: str, classname: str) -> str:
    """Where the failure text says the test failed, as "path:line" ("" when it does not)."""
    # The crash line is the deepest frame; without one (a collection error), the last entry.
    crashes = _PYTEST_CRASH.findall(text) or _PYTEST_ENTRY.findall(text)
    if crashes:
        path, line = crashes[-1]
        return f"{path}:{line}"
    frames = [(p, n) for p, n in _JS_FRAME.findall(text) if "node_modules" not in p and not p.startswith("node:")]
    if frames:
        tests = [f for f in frames if re.search(r"[./](?:test|spec)s?[./]|__tests__", f[0])]
        path, line = (tests or frames)[0]
        return f"{path}:{line}"
    for cls, filename, line in _JAVA_FRAME.findall(text):
        if classname and (cls == classname or cls.startswith(classname + "$")):
            package = cls.rpartition(".")[0]
            return f"{package.replace('.', '/') + '/' if package else ''}{filename}:{line}"
    dotnet = _DOTNET_FRAME.findall(text)
    if dotnet:
        own = [(p, n) for cls, p, n in dotnet if classname and cls.startswith(classname.partition("(")[0])]
        path, line = (own or [(p, n) for _, p, n in dotnet])[0]
        return f"{path}:{line}"
    rust = _RUST_PANIC.search(text)
    if rust:
        return f"{rust.group(1)}:{rust.group(2)}"
    go = _GO_LINE.search(text)
    if go:
        return f"{go.group(1)}:{go.group(2)}"
    php = _PHP_FRAME.search(text)
    return f"{php.group(1)}:{php.group(2)}" if php else ""


# GitHub-hosted runners' checkouts (Linux, macOS, Windows) and the container action's workspace:
# a path under them is the repository's path.
_WORKSPACE = re.compile(r"^(?:/home/runner/work/[^/]+/[^/]+/|/Users/runner/work/[^/]+/[^/]+/|"
                        r"[A-Za-z]:\\a\\[^\\]+\\[^\\]+\\|/github/workspace/|/__w/[^/]+/[^/]+/)")


def relative(path: str) -> str:
    path = _WORKSPACE.sub("", path, count=1)
    return path.replace("\\", "/") if "\\" in path and "/" not in path else path  # Windows runners
