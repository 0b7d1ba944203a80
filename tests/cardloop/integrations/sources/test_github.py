"""GitHub sources: the real PyGithub client (and httpx for downloads) against a loopback
GitHub (fake_github.py) that speaks GitHub's REST and GraphQL wire formats."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from cardloop.integrations.sources.github import (
    GitHubActionsSource,
    GitHubClient,
    GitHubReviewsSource,
    GitHubTestResultsSource,
    excerpt_job_log,
    parse_pr_ref,
)
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import ContextKind
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.cardloop.integrations.sources.fake_github import (
    BRANCH,
    LOGS,
    PR_SHA,
    PYTEST_STEP,
    REPO,
    SHA,
    T0,
    TOKEN,
    FakeGitHub,
    by_job,
    card,
    gha_lines,
    req,
    seed_ci,
    seed_reviews,
    seed_tests,
)

# --- GitHub Actions -------------------------------------------------------------------------


def test_actions_failed_jobs_with_failing_step_excerpts(fake: FakeGitHub, client: GitHubClient,
                                                        counter: TokenCounter) -> None:
    ci = seed_ci(fake)
    result = GitHubActionsSource(client, max_runs=3, count=counter.count).gather(req(card()))

    assert result.source == "github_actions"
    items = by_job(result)
    assert sorted(items) == ["2002", "2003", "2004"]   # the older CI failure and passing jobs are not here
    assert all(i.kind is ContextKind.BUILD_LOG for i in result.items)

    py = items["2002"]
    assert py.title == f"CI: CI / test (3.11) failed at step '{PYTEST_STEP}' (failure)"
    assert py.source == f"https://github.com/{REPO}/actions/runs/1001/job/2002"
    assert py.created_at == T0 + timedelta(seconds=37)
    for line in ("Workflow: CI (run #812", "Job: test (3.11)", f"Failed step: {PYTEST_STEP}", f"Head: {SHA}",
                 f"Run: https://github.com/{REPO}/actions/runs/1001", "Conclusion: failure",
                 "github_actions/2002.log"):
        assert line in py.content
    # The failing step's section: failed test names, the exception line, the ##[error] line.
    assert "FAILED tests/test_retry.py::test_backoff_schedule_caps_at_max_delay" in py.content
    assert "FAILED tests/webhooks/test_delivery.py::test_delivery_retries_on_503" in py.content
    assert "E       TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'" in py.content
    assert "##[error]Process completed with exit code 1." in py.content
    # ...and not the other steps' noise; timestamps are gone from the excerpt.
    assert "Downloading fastapi" not in py.content
    assert "2024-05-15T08:12:08" not in py.content
    assert counter.count(py.content) <= 4000

    ts = items["2003"]
    assert ts.title == "CI: Frontend / build failed at step 'Build' (failure)"   # named step: found by ##[error]
    assert "src/api/webhooks.ts(42,7): error TS2322: Type 'string' is not assignable to type 'number'." in ts.content
    assert "error TS2339: Property 'nextAttemptAt' does not exist on type 'DeliveryAttempt'." in ts.content
    assert "##[error]Process completed with exit code 2." in ts.content

    go = items["2004"]
    assert go.title == "CI: Go / test failed at step 'Run make test' (failure)"
    assert "panic: runtime error: invalid memory address or nil pointer dereference" in go.content
    assert "internal/queue/retry.go:118" in go.content
    assert "FAIL\tgithub.com/acme/ledger/internal/queue" in go.content
    assert "Syncing repository" not in go.content

    # Whole logs, byte for byte, under their labels.
    assert result.blobs == {"github_actions/2002.log": ci.pytest_log.decode(),
                            "github_actions/2003.log": ci.tsc_log.decode(),
                            "github_actions/2004.log": ci.go_log.decode()}
    # The listing asked for the card's branch and failed runs only.
    listing = fake.requests_to(r"/actions/runs$")[0]
    assert listing.query["branch"] == BRANCH and listing.query["status"] == "failure"
    # Logs: the API answered 302 with the token; storage served the log without it.
    assert len(fake.requests_to(r"/actions/jobs/\d+/logs$")) == 3
    assert all(s.headers["authorization"] == f"token {TOKEN}" for s in fake.requests_to(r"/logs$"))
    stored = fake.requests_to(r"^/storage/logs/", server="storage")
    assert len(stored) == 3 and all("authorization" not in s.headers for s in stored)
    assert "3 failed run(s), 3 failed job(s)" in result.notes[0]


def test_actions_max_runs_and_budget(fake: FakeGitHub, client: GitHubClient, counter: TokenCounter) -> None:
    # A long failing step: thousands of passing-test lines before the failure.
    text = (LOGS / "gha_pytest_failure.log").read_text()
    marker = "2024-05-15T08:11:33.9787370Z \n"
    noise = "".join(f"2024-05-15T08:11:34.{i:07d}Z tests/test_payments.py::test_case_{i} PASSED\n"
                    for i in range(6000))
    assert marker in text
    seed_ci(fake, pytest_log=text.replace(marker, marker + noise).encode())

    result = GitHubActionsSource(client, max_runs=1, excerpt_tokens=800, count=counter.count).gather(req(card()))

    (item,) = result.items
    assert counter.count(item.content) <= 800
    assert "##[error]Process completed with exit code 1." in item.content
    assert "FAILED tests/webhooks/test_delivery.py::test_delivery_retries_on_503" in item.content
    assert "test_case_3000 PASSED" not in item.content
    assert "lines cut" in item.content
    assert len(result.blobs["github_actions/2002.log"]) > 400_000   # whole, not the excerpt


def test_actions_pr_card_uses_the_pr_head(fake: FakeGitHub, client: GitHubClient, counter: TokenCounter) -> None:
    seed_ci(fake, head_sha=PR_SHA)
    fake.pulls[(REPO, 57)] = fake.pr_json(REPO, 57)
    pr_card = card(id="acme:payments-api#57", url=f"https://github.com/{REPO}/pull/57", repo=None, branch=None)

    result = GitHubActionsSource(client, count=counter.count).gather(req(pr_card))

    assert len(result.items) == 3
    listing = fake.requests_to(r"/actions/runs$")[0]
    assert listing.query == {"head_sha": PR_SHA, "status": "failure", "per_page": "100"}
    assert f"Head: {PR_SHA}" in result.items[0].content
    assert f"{REPO}#57" in result.notes[0]


def test_actions_issue_id_falls_back_to_the_branch(fake: FakeGitHub, client: GitHubClient,
                                                   counter: TokenCounter) -> None:
    seed_ci(fake)
    result = GitHubActionsSource(client, count=counter.count).gather(req(card(id="acme:payments-api#12")))
    assert len(result.items) == 3
    assert f"{REPO}#12 is an issue, not a pull request" in result.notes
    assert fake.requests_to(r"/actions/runs$")[0].query["branch"] == BRANCH


def test_cards_without_repo_or_branch_give_notes(fake: FakeGitHub, client: GitHubClient) -> None:
    for source in (GitHubActionsSource(client), GitHubReviewsSource(client), GitHubTestResultsSource(client)):
        no_repo = source.gather(req(card(repo=None, branch=None)))
        assert no_repo.items == () and "names no repository" in no_repo.notes[0]
        no_branch = source.gather(req(card(branch=None)))
        assert no_branch.items == () and "neither a branch nor a pull request" in no_branch.notes[0]
    assert fake.seen == []   # nothing to ask GitHub


def test_no_failed_runs_is_a_note(fake: FakeGitHub, client: GitHubClient) -> None:
    result = GitHubActionsSource(client).gather(req(card()))
    assert result.items == () and result.notes == (f"no failed workflow runs for {REPO} branch {BRANCH}",)


def test_expired_log_keeps_the_job_item(fake: FakeGitHub, client: GitHubClient, counter: TokenCounter) -> None:
    seed_ci(fake)
    fake.fail(r"/actions/jobs/2003/logs$", 410, "Gone")
    result = GitHubActionsSource(client, count=counter.count).gather(req(card()))
    items = by_job(result)
    assert "Log: unavailable (gone while downloading the log of job 2003" in items["2003"].content
    assert "github_actions/2003.log" not in result.blobs and "github_actions/2002.log" in result.blobs
    [missing] = result.missing
    assert missing.startswith("job 2003 (build): log not read: gone while downloading the log of job 2003")
    assert result.retry is None  # a 410 does not come back by retrying


def test_one_jobs_log_failing_keeps_the_others_and_is_retryable(fake: FakeGitHub, client: GitHubClient,
                                                                 counter: TokenCounter) -> None:
    """The log of job 2002 answers 502 every time: that job's item says why its log is missing,
    job 2004's log is read and kept, job 2003's expired log is a note; the result is partial,
    with the 502 to retry (the activity retries, then keeps this on its last attempt)."""
    seed_ci(fake)
    fake.fail(r"/actions/jobs/2002/logs$", 502, "Server Error")
    fake.fail(r"/actions/jobs/2003/logs$", 410, "Gone")
    result = GitHubActionsSource(client, count=counter.count).gather(req(card()))

    items = by_job(result)
    assert set(items) == {"2002", "2003", "2004"}
    assert "Log: unavailable (GitHub failed while downloading the log of job 2002" in items["2002"].content
    assert "HTTP 502" in items["2002"].content and "Job: test (3.11)" in items["2002"].content
    assert "Process completed with exit code 2." in items["2004"].content  # its excerpt
    assert set(result.blobs) == {"github_actions/2004.log"}
    assert [m.split(":", 1)[0] for m in result.missing] == ["job 2002 (test (3.11))", "job 2003 (build)"]
    assert result.retry is not None and result.retry.retryable and "HTTP 502" in result.retry.message
    assert result.notes[0].startswith("3 failed run(s), 3 failed job(s)")


def test_excerpt_adds_errors_from_other_steps(counter: TokenCounter) -> None:
    # A failing step with little output, and an earlier step (continue-on-error) that failed too.
    lines = ["Current runner version: '2.316.1'",
             "##[group]Run ./scripts/migrate.sh", "./scripts/migrate.sh", "##[endgroup]",
             *[f"migration {i:04d} applied" for i in range(400)],
             "psycopg.errors.UndefinedTable: relation \"webhook_deliveries\" does not exist",
             "##[error]Process completed with exit code 1.",
             "##[group]Run pytest -q", "pytest -q", "##[endgroup]",
             "ERROR: file or directory not found: tests/webhooks", "##[error]Process completed with exit code 4."]
    ex = excerpt_job_log(gha_lines(lines, T0), "Run pytest -q", 600, counter.count)
    assert ex.text.startswith("##[group]Run pytest -q")
    assert "file or directory not found: tests/webhooks" in ex.text
    assert "[... other steps of this job, with errors: ...]" in ex.text
    assert 'relation "webhook_deliveries" does not exist' in ex.text
    assert "migration 0200 applied" not in ex.text and counter.count(ex.text) <= 600
    assert ex.described.startswith("step section 'Run pytest -q' (log lines 407-411; kept all 5 lines)")
    # A named step ("Tests") is found by its ##[error]; the first one wins.
    assert excerpt_job_log(gha_lines(lines, T0), "Tests", 600, counter.count).text.startswith(
        "##[group]Run ./scripts/migrate.sh")


# --- errors ---------------------------------------------------------------------------------


def raises(fn: Callable[[], object]) -> UpstreamError:
    with pytest.raises(UpstreamError) as info:
        fn()
    err = info.value
    assert TOKEN not in err.message and TOKEN not in str(err)
    return err


def test_rate_limit_403_retries_after_the_reset(fake: FakeGitHub, client: GitHubClient) -> None:
    reset = int(time.time()) + 120
    fake.fail(rf"^/api/v3/repos/{REPO}$", 403, "API rate limit exceeded for user ID 501.",
              {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset),
               "x-ratelimit-resource": "core"})
    err = raises(lambda: GitHubActionsSource(client).gather(req(card())))
    assert err.retryable and err.retry_after is not None and 100 <= err.retry_after <= 121
    assert "rate limit" in err.message and f"reading repository {REPO}" in err.message


def test_rate_limit_wait_is_capped_and_429_retry_after_is_honoured(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.fail(rf"^/api/v3/repos/{REPO}$", 403, "API rate limit exceeded for installation ID 777.",
              {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 7200)}, times=1)
    assert raises(lambda: GitHubActionsSource(client).gather(req(card()))).retry_after == 900
    fake.fail(r"/actions/runs$", 429, "You have exceeded a secondary rate limit. Please wait a few minutes "
              "before you try again.", {"retry-after": "42"}, times=1)
    err = raises(lambda: GitHubActionsSource(client).gather(req(card())))
    assert err.retryable and err.retry_after == 42


def test_not_found_and_forbidden_are_not_retryable(fake: FakeGitHub, client: GitHubClient) -> None:
    err = raises(lambda: GitHubActionsSource(client).gather(req(card(repo="acme/missing"))))
    assert not err.retryable and err.retry_after is None
    assert "not found while reading repository acme/missing" in err.message
    fake.fail(r"/actions/runs$", 403, "Resource not accessible by integration")
    err = raises(lambda: GitHubActionsSource(client).gather(req(card())))
    assert not err.retryable and "Resource not accessible by integration" in err.message and "permission" in err.message


def test_bad_token_is_not_retryable_and_never_shown(fake: FakeGitHub) -> None:
    wrong = "ghp_WrongToken000000000000000000000000"
    with GitHubClient(fake.api_url, token=wrong, timeout=5, request_interval=None) as c:
        err = raises(lambda: GitHubReviewsSource(c).gather(req(card())))
    assert not err.retryable and "credentials" in err.message and "401" in err.message
    assert wrong not in err.message


def test_server_errors_timeouts_and_refused_connections_retry(fake: FakeGitHub, client: GitHubClient) -> None:
    seed_ci(fake)
    # One run's jobs or one job's log: partial (the other runs kept), with the failure to retry.
    fake.fail(r"/actions/runs/1001/jobs$", 502, "Server Error", times=1)
    result = GitHubActionsSource(client).gather(req(card()))
    assert set(by_job(result)) == {"2003", "2004"} and result.missing[0].startswith("run 1001 (CI): failed jobs")
    err = result.retry
    assert err is not None and err.retryable and err.retry_after is None and "HTTP 502" in err.message
    fake.fail(r"/actions/jobs/2002/logs$", 503, "Service Unavailable", times=1)
    result = GitHubActionsSource(client).gather(req(card()))
    assert result.retry is not None and result.retry.retryable and len(result.items) == 3
    # The listing of runs failing leaves nothing to show: raised, retryable.
    fake.fail(r"/actions/runs$", 502, "Server Error", times=1)
    assert raises(lambda: GitHubActionsSource(client).gather(req(card()))).retryable

    fake.delays[r"/actions/runs$"] = 2.5
    with GitHubClient(fake.api_url, token=TOKEN, timeout=1, request_interval=None) as slow:
        err = raises(lambda: GitHubActionsSource(slow).gather(req(card())))
    assert err.retryable and "timed out" in err.message
    fake.delays.clear()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed when the block ends: nothing listens there
    with GitHubClient(f"http://127.0.0.1:{port}/api/v3", token=TOKEN, timeout=2, request_interval=None) as down:
        err = raises(lambda: GitHubActionsSource(down).gather(req(card())))
    assert err.retryable and "cannot reach GitHub" in err.message


def test_github_app_installation_auth(fake: FakeGitHub, counter: TokenCounter) -> None:
    pytest.importorskip("cryptography", reason="GitHub App JWTs are signed with RS256 through cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    installation_token = "ghs_InstallationToken0123456789abcdefXYZ"
    fake.app = {"app_id": 4242, "public_key": public, "installation_id": 777, "token": installation_token}
    fake.tokens = {installation_token}
    seed_ci(fake)

    # As an env var usually carries it: one line with literal \n.
    with GitHubClient(fake.api_url, app_id="4242", app_private_key=pem.replace("\n", "\\n"), installation_id=777,
                      timeout=5, request_interval=None) as c:
        result = GitHubActionsSource(c, count=counter.count).gather(req(card()))
        assert len(result.items) == 3
        err = raises(lambda: GitHubActionsSource(c).gather(req(card(repo="acme/missing"))))
    assert installation_token not in err.message and "PRIVATE KEY" not in err.message

    (minted,) = fake.requests_to(r"/app/installations/777/access_tokens$")   # once, then cached
    assert minted.method == "POST" and minted.headers["authorization"].startswith("Bearer ")
    api_calls = [s for s in fake.seen if s.server == "api" and "access_tokens" not in s.path]
    assert api_calls and all(s.headers["authorization"] == f"token {installation_token}" for s in api_calls)

    with pytest.raises(ValueError, match="cannot sign a JWT") as bad:
        GitHubClient(fake.api_url, app_id=4242, app_private_key="not a key", installation_id=777)
    assert "not a key" not in str(bad.value)


# --- review threads -------------------------------------------------------------------------


def test_reviews_unresolved_threads_via_graphql(fake: FakeGitHub, client: GitHubClient) -> None:
    seed_reviews(fake)
    pr_card = card(id="acme:payments-api#57", url=f"https://github.com/{REPO}/pull/57")
    result = GitHubReviewsSource(client).gather(req(pr_card, Stage.REVIEW))

    assert result.source == "github_reviews"
    assert [i.title for i in result.items] == ["priya on app/webhooks/retry.py:56", "tomasz on app/settings.py:20",
                                               "priya reviewed acme/payments-api#57: changes requested"]
    assert all(i.kind is ContextKind.REVIEW_COMMENT for i in result.items)
    first = result.items[0]
    assert first.source == f"https://github.com/{REPO}/pull/57#discussion_r101"
    assert "Review thread on app/webhooks/retry.py:56 (unresolved)" in first.content
    assert "priya: Cap at max_delay *before* the jitter" in first.content
    assert "tomasz: Agreed; ADR-0007 says" in first.content
    assert "+        return jitter" in first.content and "@@ -48,12" not in first.content   # last hunk lines
    assert first.created_at == datetime(2024, 5, 15, 10, 0, tzinfo=UTC)
    assert "outdated" in result.items[1].content
    assert "swallows the 410" not in "".join(i.content for i in result.items)   # resolved: left out
    assert "priya: Two blocking issues" in result.items[2].content
    assert result.notes[0] == f"{REPO}#57: 2 open review thread(s), 1 resolved left out, 1 review summary"
    graphql = fake.requests_to(r"^/api/graphql$")
    assert len(graphql) == 2 and graphql[0].headers["authorization"] == f"token {TOKEN}"   # two pages
    assert graphql[0].body["variables"] == {"owner": "acme", "name": "payments-api", "number": 57, "after": None}


def test_reviews_without_graphql_keep_every_thread(fake: FakeGitHub, client: GitHubClient) -> None:
    seed_reviews(fake)
    fake.fail(r"^/api/graphql$", 404, "Not Found")
    result = GitHubReviewsSource(client).gather(req(card(id="acme:payments-api#57")))
    assert len(result.items) == 4
    assert any("resolution unknown, all threads kept" in n for n in result.notes)
    assert "(resolution unknown)" in result.items[0].content


def test_reviews_graphql_rate_limit_degrades_and_5xx_retries(fake: FakeGitHub, client: GitHubClient) -> None:
    seed_reviews(fake)
    fake.graphql_error = {"type": "RATE_LIMITED", "message": "API rate limit exceeded for installation ID 777."}
    result = GitHubReviewsSource(client).gather(req(card()))
    assert len(result.items) == 4   # all threads: filtering is not worth waiting out the reset
    assert any("RATE_LIMITED" in n for n in result.notes)
    fake.graphql_error = None
    fake.fail(r"^/api/graphql$", 502, "Server Error", times=1)
    err = raises(lambda: GitHubReviewsSource(client).gather(req(card())))
    assert err.retryable and err.retry_after is None


def test_client_configuration_errors(fake: FakeGitHub) -> None:
    with pytest.raises(ValueError, match="missing: private key, installation id"):
        GitHubClient(fake.api_url, app_id=4242)
    with pytest.raises(ValueError, match="need a token or a GitHub App"):
        GitHubClient(fake.api_url)
    with pytest.raises(ValueError, match="not on the API's host"):
        GitHubClient(fake.api_url, token=TOKEN, graphql_url="https://api.github.com/graphql")


def test_reviews_find_the_pr_of_the_branch(fake: FakeGitHub, client: GitHubClient) -> None:
    seed_reviews(fake)
    result = GitHubReviewsSource(client).gather(req(card()))
    assert len(result.items) == 3
    assert fake.requests_to(r"/pulls$")[0].query == {"state": "open", "head": f"acme:{BRANCH}", "per_page": "100"}
    none = GitHubReviewsSource(client).gather(req(card(branch="card/other")))
    assert none.items == () and none.notes == (f"no open pull request from branch card/other of {REPO}",)


# --- test results ---------------------------------------------------------------------------

def test_tests_from_junit_artifacts(fake: FakeGitHub, client: GitHubClient, counter: TokenCounter) -> None:
    seed_tests(fake)
    result = GitHubTestResultsSource(client, count=counter.count).gather(req(card(), Stage.TESTING))

    assert result.source == "github_tests"
    (item,) = result.items
    assert item.kind is ContextKind.TEST_RESULT
    assert item.title == "Tests: 3 failed of 7"
    assert item.source == f"https://github.com/{REPO}/actions/runs/3001/artifacts/4001"
    c = item.content
    assert "tests.test_retry.test_backoff_schedule_caps_at_max_delay [failure]" in c
    assert "message: assert [1.0, 2.0, 4.0, 8.0, 16.0, 32.0] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]" in c
    assert "at tests/test_retry.py:53" in c  # pytest wrote line="52": its def, counted from 0
    assert "| def test_backoff_schedule_caps_at_max_delay() -> None:" in c   # the first lines
    assert "tests.webhooks.test_delivery.test_delivery_retries_on_503 [error]" in c
    assert "E       TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'" in c   # a later E line
    assert "tests.integration.test_dispatcher.test_skip_locked_never_double_sends [failure]" in c
    assert "test_health" not in c and "test_dead_letter_counter" not in c
    assert counter.count(c) <= 4000
    assert "test_delivery_retries_on_503" in result.blobs["github_tests/4001.txt"]
    assert "artifact junit-3.10 has expired" in result.notes
    assert "artifact junit-3.11: 3 failed of 7 in 2 JUnit file(s)" in result.notes
    # The zip came through the 302 to storage, without the token; no annotations were needed.
    (stored,) = fake.requests_to(r"^/storage/artifacts/4001\.zip$", server="storage")
    assert "authorization" not in stored.headers
    assert fake.requests_to(r"/check-runs$") == []


def test_tests_budget_keeps_whole_failures(fake: FakeGitHub, client: GitHubClient, counter: TokenCounter) -> None:
    seed_tests(fake)
    result = GitHubTestResultsSource(client, count=counter.count, excerpt_tokens=300).gather(req(card()))
    (item,) = result.items
    assert counter.count(item.content) <= 300
    assert "more failed tests: see the stored report" in item.content


def test_tests_from_check_run_annotations(fake: FakeGitHub, client: GitHubClient, counter: TokenCounter) -> None:
    seed_tests(fake, artifacts=False)
    result = GitHubTestResultsSource(client, count=counter.count).gather(req(card()))
    (item,) = result.items
    assert item.title == "Tests: 2 failed (check run 'test (3.11)')"
    assert item.source == f"https://github.com/{REPO}/runs/5001"
    assert "tests/test_retry.py::test_backoff_schedule_caps_at_max_delay" in item.content
    assert "TypeError: unsupported operand type(s)" in item.content
    assert "at tests/webhooks/test_delivery.py:36" in item.content
    assert "Process completed" not in item.content
    assert fake.requests_to(r"/check-runs/5002/annotations$") == []   # a passing check is not read
    assert any("no JUnit XML" in n for n in result.notes)


def test_pr_ref_parsing() -> None:
    assert parse_pr_ref(card(url="https://github.example.com/acme/api/pull/12/files")) == \
        parse_pr_ref(card(id="acme:api#12", url="https://github.example.com/acme/api/pull/12"))
    ref = parse_pr_ref(card(url="https://github.com/acme/api/pull/12"))
    assert ref is not None and (ref.repo, ref.number, ref.definite) == ("acme/api", 12, True)
    ref = parse_pr_ref(card(id="acme/api#9"))
    assert ref is not None and (ref.repo, ref.number, ref.definite) == ("acme/api", 9, False)
    assert parse_pr_ref(card(url="https://github.com/orgs/acme/projects/7?pane=issue&itemId=PAY-142")) is None
