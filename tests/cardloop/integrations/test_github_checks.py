"""A pushed commit's CI state from GitHub Actions, read through the real PyGithub client from a
loopback GitHub (fake_github.py) with the runs, jobs and real logs the sources' tests use."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from cardloop.contracts.secrets import Secret
from cardloop.integrations.github_checks import MAX_EXCERPT, MAX_LOGS, CIStatus, RunSummary, ci_status
from cardloop.integrations.upstream import UpstreamError
from tests.cardloop.integrations.sources.fake_github import (
    GO_STEPS,
    LOGS,
    PYTEST_STEP,
    REPO,
    SHA,
    T0,
    TOKEN,
    FakeGitHub,
    seed_ci,
    serving,
)

RUNS = f"https://github.com/{REPO}/actions/runs"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serving() as github:
        yield github


def status(fake: FakeGitHub, sha: str = SHA, token: Any = TOKEN, **kw: Any) -> CIStatus:
    return ci_status(fake.api_url, token, REPO, sha, timeout=5, request_interval=None, **kw)


def run(fake: FakeGitHub, run_id: int, name: str, *, status: str = "completed", conclusion: str | None = "success",
        workflow_id: int | None = None, minutes: int = 0, event: str = "push", sha: str = SHA) -> dict[str, Any]:
    return fake.run_json(REPO, run_id, name=name, workflow_id=workflow_id or run_id, head_sha=sha, status=status,
                         conclusion=conclusion, created=T0 + timedelta(minutes=minutes), event=event)


def test_no_run_for_the_commit_is_none(fake: FakeGitHub) -> None:
    fake.runs[REPO] = [run(fake, 1, "CI", conclusion="failure", sha="0" * 40)]   # another commit's
    assert status(fake) == CIStatus("none", [], [])
    (listing,) = fake.requests_to(r"/actions/runs$")
    assert listing.query["head_sha"] == SHA
    assert listing.headers["authorization"] == f"token {TOKEN}"


def test_a_run_still_going_is_pending(fake: FakeGitHub) -> None:
    fake.runs[REPO] = [run(fake, 3001, "CI", status="in_progress", conclusion=None, minutes=5),
                       run(fake, 3002, "Docs", conclusion="success", minutes=4),
                       run(fake, 3003, "Lint", status="queued", conclusion=None, minutes=3)]
    result = status(fake)
    assert result.state == "pending" and result.failing == []
    assert result.runs == [RunSummary("CI", "in_progress", None, f"{RUNS}/3001"),
                           RunSummary("Docs", "completed", "success", f"{RUNS}/3002"),
                           RunSummary("Lint", "queued", None, f"{RUNS}/3003")]
    assert fake.requests_to(r"/jobs$") == []


def test_every_run_completed_without_failing_is_success(fake: FakeGitHub) -> None:
    fake.runs[REPO] = [run(fake, 1, "CI", minutes=3), run(fake, 2, "Docs", conclusion="skipped", minutes=2),
                       run(fake, 3, "Labels", conclusion="neutral", minutes=1)]
    result = status(fake)
    assert result.state == "success" and result.failing == []
    assert [(r.name, r.conclusion) for r in result.runs] == [("CI", "success"), ("Docs", "skipped"),
                                                             ("Labels", "neutral")]
    assert result.describe() == "CI: success; Docs: skipped; Labels: neutral"


def test_a_failed_run_brings_each_failed_jobs_error_lines(fake: FakeGitHub) -> None:
    seed_ci(fake)   # CI, Frontend and Go failed; Docs passed; an older CI run is another commit's
    result = status(fake)
    assert result.state == "failure"
    assert [(r.name, r.conclusion) for r in result.runs] == [("Docs", "success"), ("CI", "failure"),
                                                             ("Frontend", "failure"), ("Go", "failure")]
    assert len(result.failing) == 3 and all(len(f) <= MAX_EXCERPT for f in result.failing)
    py, ts, go = result.failing

    assert py.startswith(f"CI / test (3.11): failure at step '{PYTEST_STEP}'\n{RUNS}/1001/job/2002\n")
    for line in ("FAILED tests/test_retry.py::test_backoff_schedule_caps_at_max_delay",
                 "FAILED tests/webhooks/test_delivery.py::test_delivery_retries_on_503",
                 "E       TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'",
                 "##[error]Process completed with exit code 1."):
        assert line in py
    assert "Downloading fastapi" not in py and "2024-05-15T08:12:08" not in py   # other steps, timestamps

    assert ts.startswith("Frontend / build: failure at step 'Build'")
    assert "src/api/webhooks.ts(42,7): error TS2322: Type 'string' is not assignable to type 'number'." in ts
    assert go.startswith("Go / test: failure at step 'Run make test'")
    assert "panic: runtime error: invalid memory address or nil pointer dereference" in go
    assert "Syncing repository" not in go

    # Passing jobs are not read; logs come from storage without the token.
    assert [s.path.rsplit("/", 2)[-2] for s in fake.requests_to(r"/actions/jobs/\d+/logs$")] == [
        "2002", "2003", "2004"]
    stored = fake.requests_to(r"^/storage/logs/", server="storage")
    assert len(stored) == 3 and all("authorization" not in s.headers for s in stored)


def test_a_long_log_is_cut_around_its_errors(fake: FakeGitHub) -> None:
    text = (LOGS / "gha_pytest_failure.log").read_text()
    marker = "2024-05-15T08:11:33.9787370Z \n"
    noise = "".join(f"2024-05-15T08:11:34.{i:07d}Z tests/test_payments.py::test_case_{i} PASSED\n"
                    for i in range(6000))
    seed_ci(fake, pytest_log=text.replace(marker, marker + noise).encode())
    py = status(fake).failing[0]
    assert len(py) <= MAX_EXCERPT and "lines cut" in py
    assert "##[error]Process completed with exit code 1." in py
    assert "FAILED tests/webhooks/test_delivery.py::test_delivery_retries_on_503" in py
    assert "test_case_3000 PASSED" not in py


@pytest.mark.parametrize("conclusion", ["failure", "timed_out", "cancelled", "action_required", "startup_failure"])
def test_each_conclusion_that_does_not_pass_is_failure(fake: FakeGitHub, conclusion: str) -> None:
    fake.runs[REPO] = [run(fake, 7, "CI", conclusion=conclusion), run(fake, 8, "Docs")]
    result = status(fake)
    assert result.state == "failure"
    # No failed job to read (a cancelled run, one waiting for approval): the run itself says so.
    assert result.failing == [f"CI: the run ended {conclusion} without a failed job\n{RUNS}/7"]


def test_the_newest_run_of_a_workflow_and_event_counts(fake: FakeGitHub) -> None:
    fake.runs[REPO] = [run(fake, 10, "CI", conclusion="failure", workflow_id=11, minutes=0, event="pull_request"),
                       run(fake, 12, "CI", conclusion="success", workflow_id=11, minutes=9, event="pull_request"),
                       run(fake, 13, "CI", conclusion="success", workflow_id=11, minutes=8, event="push")]
    result = status(fake)
    assert result.state == "success" and [r.url for r in result.runs] == [f"{RUNS}/12", f"{RUNS}/13"]

    fake.runs[REPO].append(run(fake, 14, "CI", status="in_progress", conclusion=None, workflow_id=11,
                               minutes=10, event="pull_request"))
    assert status(fake).state == "pending"


def test_a_log_github_no_longer_has_is_named_not_fatal(fake: FakeGitHub) -> None:
    seed_ci(fake)
    del fake.logs[2003]
    result = status(fake)
    assert result.state == "failure" and len(result.failing) == 3
    ts = result.failing[1]
    assert ts.startswith("Frontend / build: failure") and "(log unavailable: not found" in ts


def test_past_the_log_limit_failed_jobs_are_named_without_their_logs(fake: FakeGitHub) -> None:
    fake.runs[REPO] = [run(fake, 20, "Matrix", conclusion="failure")]
    fake.jobs[20] = [fake.job_json(REPO, 20, 2100 + n, name=f"test ({n})", workflow="Matrix", steps=GO_STEPS)
                     for n in range(MAX_LOGS + 2)]
    fake.logs.update({2100 + n: b"panic: boom\n##[error]Process completed with exit code 2.\n"
                      for n in range(MAX_LOGS + 2)})
    result = status(fake)
    assert len(result.failing) == MAX_LOGS + 2
    assert all("panic: boom" in f for f in result.failing[:MAX_LOGS])
    assert all(f.endswith(f"(log not read: more than {MAX_LOGS} failed jobs)") for f in result.failing[MAX_LOGS:])
    assert len(fake.requests_to(r"/actions/jobs/\d+/logs$")) == MAX_LOGS


# -- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [r"/actions/runs$", r"/actions/runs/\d+/jobs$", r"/actions/jobs/\d+/logs$"])
def test_a_server_error_is_retryable(fake: FakeGitHub, path: str) -> None:
    seed_ci(fake)
    fake.fail(path, 502, "Server Error")
    with pytest.raises(UpstreamError) as exc:
        status(fake)
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == ("server", True, 502)


def test_a_rate_limit_is_retryable_after_githubs_wait(fake: FakeGitHub) -> None:
    fake.fail(r"/actions/runs$", 429, "You have exceeded a secondary rate limit.", {"Retry-After": "30"})
    with pytest.raises(UpstreamError) as exc:
        status(fake)
    assert (exc.value.kind, exc.value.retryable, exc.value.retry_after) == ("rate_limited", True, 30.0)


def test_a_rejected_token_is_final_and_never_named(fake: FakeGitHub) -> None:
    wrong = "ghp_WrongToken000000000000000000000000"
    with pytest.raises(UpstreamError) as exc:
        status(fake, token=Secret(wrong, "GITHUB_TOKEN"))
    err = exc.value
    assert (err.kind, err.retryable, err.status) == ("auth", False, 401) and "Bad credentials" in str(err)
    assert wrong not in str(err) and wrong not in repr(err)


def test_an_unknown_repository_is_not_found(fake: FakeGitHub) -> None:
    with pytest.raises(UpstreamError) as exc:
        ci_status(fake.api_url, TOKEN, "acme/nope", SHA, timeout=5, request_interval=None)
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == ("not_found", False, 404)


def test_an_unreachable_github_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UpstreamError) as exc:
        ci_status(f"http://127.0.0.1:{port}/api/v3", TOKEN, REPO, SHA, timeout=2, request_interval=None)
    assert exc.value.kind == "connection" and exc.value.retryable and TOKEN not in str(exc.value)


def test_no_token_is_not_configured_without_calling(fake: FakeGitHub) -> None:
    for token in (None, "", Secret("", "GITHUB_TOKEN")):
        with pytest.raises(UpstreamError) as exc:
            status(fake, token=token)
        assert exc.value.kind == "not_configured" and not exc.value.retryable
    assert fake.seen == []


@pytest.mark.parametrize(("repo", "sha"), [
    ("payments-api", SHA),
    ("acme/payments/api", SHA),
    (REPO, SHA[:7]),          # GitHub matches head_sha exactly: a short sha would find nothing, forever
    (REPO, ""),
    (REPO, "z" * 40),
    (REPO, None),
])
def test_a_repository_or_sha_that_cannot_work_raises_value_error(fake: FakeGitHub, repo: str, sha: Any) -> None:
    with pytest.raises(ValueError):
        ci_status(fake.api_url, TOKEN, repo, sha, request_interval=None)
    assert fake.seen == []


def test_an_upper_case_sha_is_asked_for_in_lower_case(fake: FakeGitHub) -> None:
    fake.runs[REPO] = [run(fake, 1, "CI")]
    assert status(fake, sha=SHA.upper()).state == "success"
