"""Pull requests, comments and reviews on a loopback GitHub (fake_github.py) through the real PyGithub
client: found before made, so a retried activity never opens a second PR or posts a second comment
or review."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from cardloop.contracts.secrets import Secret
from cardloop.integrations.github_results import (
    MAX_BODY,
    MAX_REVIEW_COMMENTS,
    MOVED_HEADING,
    PR_BODY_BUDGET,
    PullRequestResult,
    PullRequests,
    ReviewComment,
    ReviewResult,
    marker_line,
    moved_in_body,
    patch_lines,
    pull_request_body,
    review_body,
    with_marker,
)
from cardloop.integrations.upstream import UpstreamError
from tests.cardloop.integrations.sources.fake_github import BRANCH, PR_SHA, REPO, TOKEN, FakeGitHub, Seen, serving

MARK = "pr:PAY-142"
HIDDEN = f"<!-- cardloop:{MARK} -->"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serving() as github:
        yield github


@pytest.fixture
def prs(fake: FakeGitHub) -> Iterator[PullRequests]:
    client = PullRequests(fake.api_url, Secret(TOKEN, "GITHUB_TOKEN"), timeout=5, request_interval=None,
                          write_interval=None)
    yield client
    client.close()


def ensure(prs: PullRequests, **overrides: Any) -> PullRequestResult:
    args: dict[str, Any] = {"head": BRANCH, "base": None, "title": "PAY-142: retry failed webhook deliveries",
                            "body": "Adds capped exponential backoff.", "marker": MARK}
    args.update(overrides)
    return prs.ensure(REPO, **args)


def writes(fake: FakeGitHub) -> list[tuple[str, str]]:
    return [(s.method, s.path.removeprefix(f"/api/v3/repos/{REPO}")) for s in fake.seen
            if s.server == "api" and s.method in ("POST", "PATCH")]


# -- pull requests ---------------------------------------------------------------------------------


def test_ensure_creates_once_then_updates_the_same_pull_request(fake: FakeGitHub, prs: PullRequests) -> None:
    first = ensure(prs)
    assert first.created is True
    assert first.url == f"https://github.com/{REPO}/pull/{first.number}"
    pr = fake.pulls[(REPO, first.number)]
    assert pr["head"]["label"] == f"acme:{BRANCH}" and pr["base"]["ref"] == "main"
    assert pr["body"] == f"Adds capped exponential backoff.\n\n{HIDDEN}"

    second = ensure(prs, title="PAY-142: retry webhooks (v2)", body="Now with jitter.")
    assert second == PullRequestResult(number=first.number, url=first.url, created=False)
    assert len(fake.open_pulls(REPO)) == 1
    assert pr["title"] == "PAY-142: retry webhooks (v2)"
    assert pr["body"].count(HIDDEN) == 1 and pr["body"] == f"Now with jitter.\n\n{HIDDEN}"
    assert writes(fake) == [("POST", "/pulls"), ("PATCH", f"/pulls/{first.number}")]

    # A retried activity with the same text writes nothing at all.
    assert ensure(prs, title="PAY-142: retry webhooks (v2)", body="Now with jitter.").created is False
    assert len(writes(fake)) == 2


def test_the_lookup_names_the_head_as_owner_and_branch(fake: FakeGitHub, prs: PullRequests) -> None:
    # Another open PR: GitHub ignores a bare-branch head filter and would list it too.
    other = fake.new_pull(REPO, head="someone-else", base="main", title="Unrelated", body="")
    result = ensure(prs)
    assert result.created is True and result.number != other["number"]
    lookups = fake.requests_to(r"/pulls$")
    assert lookups[0].method == "GET"
    assert lookups[0].query["head"] == f"acme:{BRANCH}" and lookups[0].query["state"] == "open"
    assert other["title"] == "Unrelated"


def test_base_defaults_to_the_repositorys_default_branch(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.repos[REPO]["default_branch"] = "develop"
    result = ensure(prs)
    assert fake.pulls[(REPO, result.number)]["base"]["ref"] == "develop"
    assert len(fake.requests_to(rf"^/api/v3/repos/{REPO}$")) == 1
    assert fake.requests_to(r"/pulls$")[-1].body["base"] == "develop"


def test_an_explicit_base_needs_no_repository_lookup(fake: FakeGitHub, prs: PullRequests) -> None:
    result = ensure(prs, base="release/2024.05")
    assert fake.pulls[(REPO, result.number)]["base"]["ref"] == "release/2024.05"
    assert fake.requests_to(rf"^/api/v3/repos/{REPO}$") == []


def test_an_existing_pull_request_is_updated_and_the_marker_never_doubles(fake: FakeGitHub,
                                                                          prs: PullRequests) -> None:
    mine = fake.new_pull(REPO, head=BRANCH, base="main", title="WIP", body="opened by hand")
    # The caller passes back a body that already carries the marker (say, read from the PR).
    result = ensure(prs, body=f"Reworked.\n\n{HIDDEN}\n")
    assert result == PullRequestResult(mine["number"], mine["html_url"], created=False)
    assert mine["body"] == f"Reworked.\n\n{HIDDEN}"
    assert mine["title"] == "PAY-142: retry failed webhook deliveries"
    assert [m for m, _ in writes(fake)] == ["PATCH"]
    assert fake.requests_to(rf"^/api/v3/repos/{REPO}$") == []   # found: no default branch needed


def test_a_create_that_loses_the_race_finds_the_winner_and_updates_it(fake: FakeGitHub,
                                                                      prs: PullRequests) -> None:
    winner: dict[str, Any] = {}

    def someone_else_creates_it_first(seen: Seen) -> None:
        if seen.method == "POST" and seen.path.endswith("/pulls") and not winner:
            winner.update(fake.new_pull(REPO, head=BRANCH, base="main", title="theirs", body="theirs"))

    fake.hooks.append(someone_else_creates_it_first)
    result = ensure(prs)
    assert result == PullRequestResult(winner["number"], winner["html_url"], created=False)
    assert len(fake.open_pulls(REPO)) == 1
    pr = fake.pulls[(REPO, winner["number"])]
    assert pr["title"] == "PAY-142: retry failed webhook deliveries" and pr["body"].count(HIDDEN) == 1
    assert [m for m, _ in writes(fake)] == ["POST", "PATCH"]


def test_a_create_whose_answer_was_lost_is_found_on_the_retry(fake: FakeGitHub) -> None:
    def slow_create(seen: Seen) -> None:
        if seen.method == "POST" and seen.path.endswith("/pulls"):
            time.sleep(1.6)

    fake.hooks.append(slow_create)
    with PullRequests(fake.api_url, TOKEN, timeout=1, request_interval=None, write_interval=None) as prs:
        with pytest.raises(UpstreamError) as exc:
            ensure(prs)
        assert exc.value.kind == "timeout" and exc.value.retryable
        deadline = time.monotonic() + 5
        while not fake.open_pulls(REPO) and time.monotonic() < deadline:   # GitHub finishes anyway
            time.sleep(0.05)
        fake.hooks.clear()
        again = ensure(prs)
    assert again.created is False and [again.number] == [p["number"] for p in fake.open_pulls(REPO)]


def test_a_pull_request_from_a_fork_names_its_owner(fake: FakeGitHub, prs: PullRequests) -> None:
    first = ensure(prs, head="contributor:fix-retries", base="main")
    assert fake.pulls[(REPO, first.number)]["head"]["label"] == "contributor:fix-retries"
    assert fake.requests_to(r"/pulls$")[-1].body["head"] == "contributor:fix-retries"
    assert ensure(prs, head="contributor:fix-retries", base="main").number == first.number
    assert len(fake.open_pulls(REPO)) == 1


def test_among_open_pull_requests_from_the_head_ours_is_preferred(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.new_pull(REPO, head=BRANCH, base="release", title="backport", body="by hand")
    ours = fake.new_pull(REPO, head=BRANCH, base="main", title="old", body=f"old\n\n{HIDDEN}")
    assert ensure(prs, base="release").number == ours["number"]


def test_another_validation_failure_is_final_with_githubs_reason(fake: FakeGitHub, prs: PullRequests) -> None:
    no_commits = f"No commits between main and {BRANCH}"
    fake.fail(r"/pulls$", 422, "Validation Failed", method="POST",
              errors=[{"resource": "PullRequest", "code": "custom", "message": no_commits}])
    with pytest.raises(UpstreamError) as exc:
        ensure(prs)
    assert exc.value.kind == "invalid_request" and not exc.value.retryable and exc.value.status == 422
    assert no_commits in str(exc.value)


# -- comments --------------------------------------------------------------------------------------


def test_a_comment_is_posted_once_then_edited_by_its_marker(fake: FakeGitHub, prs: PullRequests) -> None:
    pr = ensure(prs)
    cid = prs.comment(REPO, pr.number, body="Tests: 212 passed.", marker="status")
    mark = marker_line("status")
    (comment,) = fake.issue_comments[(REPO, pr.number)]
    assert comment["id"] == cid and comment["body"] == f"Tests: 212 passed.\n\n{mark}"

    assert prs.comment(REPO, pr.number, body="Tests: 213 passed.", marker="status") == cid
    (comment,) = fake.issue_comments[(REPO, pr.number)]
    assert comment["body"] == f"Tests: 213 passed.\n\n{mark}" and comment["body"].count(mark) == 1
    assert writes(fake)[1:] == [("POST", f"/issues/{pr.number}/comments"), ("PATCH", f"/issues/comments/{cid}")]

    other = prs.comment(REPO, pr.number, body="Blocked: needs a decision.", marker="blocked")
    assert other != cid and len(fake.issue_comments[(REPO, pr.number)]) == 2


def test_the_marked_comment_is_found_on_a_later_page(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.max_per_page = 2
    fake.issues[(REPO, 41)] = {"number": 41}
    mark = marker_line("status")
    fake.add_comment(REPO, 41, "Looks good", author="priya")
    fake.add_comment(REPO, 41, f"> {mark}\n> old status\n\nquoting the bot", author="tomasz")  # a quote
    fake.add_comment(REPO, 41, "ping", author="priya")
    ours = fake.add_comment(REPO, 41, f"old status\n\n{mark}")

    assert prs.comment(REPO, 41, body="new status", marker="status") == ours["id"]
    assert ours["body"] == f"new status\n\n{mark}"
    assert len(fake.issue_comments[(REPO, 41)]) == 4
    assert [s.query.get("page", "1") for s in fake.requests_to(r"/issues/41/comments$") if s.method == "GET"] == [
        "1", "2"]
    assert writes(fake) == [("PATCH", f"/issues/comments/{ours['id']}")]


def test_a_persons_comment_carrying_the_marker_is_never_edited_nor_taken_for_ours(fake: FakeGitHub,
                                                                                   prs: PullRequests) -> None:
    fake.issues[(REPO, 41)] = {"number": 41}
    mark = marker_line("status")
    theirs = fake.add_comment(REPO, 41, f"copied from the bot\n\n{mark}", author="mallory")
    cid = prs.comment(REPO, 41, body="new status", marker="status")
    assert cid != theirs["id"] and theirs["body"] == f"copied from the bot\n\n{mark}"
    assert writes(fake) == [("POST", "/issues/41/comments")]
    assert fake.requests_to(r"^/api/v3/user$")  # whose token it is, asked of GitHub
    # The next attempt edits cardloop's own comment, not theirs.
    assert prs.comment(REPO, 41, body="newer status", marker="status") == cid
    assert writes(fake)[1:] == [("PATCH", f"/issues/comments/{cid}")]


def test_the_configured_login_is_cardloops_account(fake: FakeGitHub) -> None:
    fake.issues[(REPO, 41)] = {"number": 41}
    mark = marker_line("status")
    ours = fake.add_comment(REPO, 41, f"old\n\n{mark}", author="Acme-Bot")
    with PullRequests(fake.api_url, TOKEN, timeout=5, request_interval=None, write_interval=None,
                      login="acme-bot") as client:
        assert client.comment(REPO, 41, body="new", marker="status") == ours["id"]
    assert not fake.requests_to(r"^/api/v3/user$") and ours["body"] == f"new\n\n{mark}"


def test_with_an_installation_token_a_bots_comment_is_ours(fake: FakeGitHub) -> None:
    """A GitHub App's token cannot read GET /user (403): cardloop's comments are then its bot's."""
    fake.app, fake.login = {"token": "ghs_" + "I" * 36}, "acme-cardloop[bot]"
    fake.tokens.add(fake.app["token"])
    fake.issues[(REPO, 41)] = {"number": 41}
    mark = marker_line("status")
    theirs = fake.add_comment(REPO, 41, f"mine\n\n{mark}", author="mallory")
    with PullRequests(fake.api_url, fake.app["token"], timeout=5, request_interval=None,
                      write_interval=None) as client:
        cid = client.comment(REPO, 41, body="status", marker="status")
        assert client.comment(REPO, 41, body="newer", marker="status") == cid != theirs["id"]
    assert theirs["body"] == f"mine\n\n{mark}" and len(fake.issue_comments[(REPO, 41)]) == 2


def test_marker_lookalikes_in_what_is_written_are_defused(fake: FakeGitHub, prs: PullRequests) -> None:
    """A model's reply that carries another run's marker line cannot make that run's comment."""
    fake.issues[(REPO, 41)] = {"number": 41}
    first = prs.comment(REPO, 41, body="The plan.\n<!-- cardloop:acme/github/PAY-1/1/coding -->\nEnd.",
                        marker="acme/github/PAY-1/2/planning")
    [posted] = fake.issue_comments[(REPO, 41)]
    assert "<!-- cardloop (quoted):acme/github/PAY-1/1/coding -->" in posted["body"]
    assert posted["body"].endswith("\n\n<!-- cardloop:acme/github/PAY-1/2/planning -->")
    second = prs.comment(REPO, 41, body="coding done", marker="acme/github/PAY-1/1/coding")
    assert second != first and posted["body"].startswith("The plan.")
    assert len(fake.issue_comments[(REPO, 41)]) == 2


def test_an_unchanged_comment_is_not_written_again(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.issues[(REPO, 41)] = {"number": 41}
    cid = prs.comment(REPO, 41, body="same", marker="status")
    assert prs.comment(REPO, 41, body="same", marker="status") == cid
    assert writes(fake) == [("POST", "/issues/41/comments")]


def test_a_comment_on_a_missing_issue_is_not_found(fake: FakeGitHub, prs: PullRequests) -> None:
    with pytest.raises(UpstreamError) as exc:
        prs.comment(REPO, 999, body="hello", marker="status")
    assert exc.value.kind == "not_found" and not exc.value.retryable and exc.value.status == 404


# -- auth and failures -----------------------------------------------------------------------------


def test_every_request_carries_the_token(fake: FakeGitHub, prs: PullRequests) -> None:
    pr = ensure(prs)
    prs.comment(REPO, pr.number, body="hi", marker="status")
    api = [s for s in fake.seen if s.server == "api"]
    assert len(api) >= 4 and all(s.headers["authorization"] == f"token {TOKEN}" for s in api)


def test_a_rejected_token_is_final_and_never_named(fake: FakeGitHub) -> None:
    wrong = "ghp_WrongToken000000000000000000000000"
    with (PullRequests(fake.api_url, wrong, request_interval=None, write_interval=None) as prs,
          pytest.raises(UpstreamError) as exc):
        ensure(prs)
    err = exc.value
    assert err.kind == "auth" and not err.retryable and err.status == 401
    assert "Bad credentials" in str(err)
    assert wrong not in str(err) and wrong not in repr(err) and TOKEN not in repr(err)


def test_a_message_echoing_the_token_is_scrubbed(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.fail(r"/pulls$", 401, f"token {TOKEN} is revoked")   # a proxy that echoes what it got
    with pytest.raises(UpstreamError) as exc:
        ensure(prs)
    assert TOKEN not in str(exc.value) and "***" in str(exc.value)


@pytest.mark.parametrize(("status", "message", "kind"), [
    (403, "Resource not accessible by integration", "auth"),
    (404, "Not Found", "not_found"),
    (422, "Validation Failed", "invalid_request"),
])
def test_final_answers_are_not_retried(fake: FakeGitHub, prs: PullRequests, status: int, message: str,
                                       kind: str) -> None:
    fake.fail(r"/pulls$", status, message)
    with pytest.raises(UpstreamError) as exc:
        ensure(prs)
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == (kind, False, status)
    assert message in str(exc.value)


def test_a_server_error_is_retryable(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.fail(r"/pulls$", 502, "Server Error", method="POST")
    with pytest.raises(UpstreamError) as exc:
        ensure(prs)
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == ("server", True, 502)
    assert exc.value.retry_after is None


def test_a_wait_github_asks_for_is_kept(fake: FakeGitHub, prs: PullRequests) -> None:
    fake.fail(r"/pulls$", 503, "Service Unavailable", {"Retry-After": "7"}, times=1)
    with pytest.raises(UpstreamError) as exc:
        ensure(prs)
    assert (exc.value.kind, exc.value.retryable, exc.value.retry_after) == ("server", True, 7.0)

    fake.fail(r"/comments$", 429, "You have exceeded a secondary rate limit.", {"Retry-After": "42"}, times=1)
    with pytest.raises(UpstreamError) as exc:
        prs.comment(REPO, 1, body="x", marker="status")
    assert (exc.value.kind, exc.value.retryable, exc.value.retry_after) == ("rate_limited", True, 42.0)


def test_a_403_rate_limit_retries_after_the_reset(fake: FakeGitHub, prs: PullRequests) -> None:
    reset = str(int(time.time()) + 120)
    fake.fail(r"/pulls$", 403, "API rate limit exceeded for user ID 501.",
              {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset})
    with pytest.raises(UpstreamError) as exc:
        ensure(prs)
    assert exc.value.kind == "rate_limited" and exc.value.retryable
    assert exc.value.retry_after is not None and 100 <= exc.value.retry_after <= 121


def test_an_unreachable_github_is_retryable() -> None:
    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (PullRequests(f"http://127.0.0.1:{port}/api/v3", TOKEN, timeout=2, request_interval=None,
                       write_interval=None) as prs, pytest.raises(UpstreamError) as exc):
        ensure(prs)
    assert exc.value.kind == "connection" and exc.value.retryable and TOKEN not in str(exc.value)


def test_no_token_fails_as_not_configured_without_calling(fake: FakeGitHub) -> None:
    for token in (None, "", Secret("", "GITHUB_TOKEN")):
        with PullRequests(fake.api_url, token, request_interval=None, write_interval=None) as prs:
            with pytest.raises(UpstreamError) as exc:
                ensure(prs)
            assert exc.value.kind == "not_configured" and not exc.value.retryable
            with pytest.raises(UpstreamError):
                prs.comment(REPO, 1, body="x", marker="status")
    assert fake.seen == []


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [
    {"head": ""},
    {"head": "acme:"},
    {"head": "feature branch"},
    {"head": ":branch"},
    {"head": "main", "base": "main"},
    {"base": ""},
    {"title": "  \n "},
    {"marker": ""},
    {"marker": "has space"},
    {"marker": "x-->y"},
    {"marker": "m" * 601},
    {"body": None},
])
def test_arguments_that_cannot_work_raise_value_error_before_any_call(fake: FakeGitHub, prs: PullRequests,
                                                                      overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ensure(prs, **overrides)
    assert fake.seen == []


@pytest.mark.parametrize("repo", ["payments-api", "acme/", "/payments-api", "acme/payments/api", "acme/..", ""])
def test_a_repository_not_owner_slash_name_raises_value_error(fake: FakeGitHub, prs: PullRequests,
                                                              repo: str) -> None:
    with pytest.raises(ValueError):
        prs.ensure(repo, head=BRANCH, base=None, title="t", body="b", marker=MARK)
    with pytest.raises(ValueError):
        prs.comment(repo, 1, body="b", marker=MARK)
    assert fake.seen == []


@pytest.mark.parametrize("number", [0, -3, True, "7"])
def test_a_comment_needs_a_positive_number(fake: FakeGitHub, prs: PullRequests, number: Any) -> None:
    with pytest.raises(ValueError):
        prs.comment(REPO, number, body="b", marker="status")
    assert fake.seen == []


def test_a_card_key_is_a_marker(fake: FakeGitHub, prs: PullRequests) -> None:
    key = "acme/github-projects/acme%3Apayments-api#142/pull-request"   # card_key_id escapes ":" as %3A
    result = ensure(prs, marker=key)
    assert fake.pulls[(REPO, result.number)]["body"].endswith(f"\n\n<!-- cardloop:{key} -->")


def test_a_long_title_is_one_line_within_githubs_limit(fake: FakeGitHub, prs: PullRequests) -> None:
    result = ensure(prs, title="Retry\nwebhooks " + "x" * 400)
    title = fake.pulls[(REPO, result.number)]["title"]
    assert title.startswith("Retry webhooks x") and len(title) == 256 and "\n" not in title


def test_a_body_over_githubs_limit_is_cut_and_keeps_its_marker() -> None:
    mark = marker_line(MARK)
    text = with_marker("a" * (MAX_BODY + 500), mark)
    assert len(text) <= MAX_BODY and text.endswith(f"\n\n{mark}") and text.count(mark) == 1
    assert with_marker("", mark) == mark


# -- the pull request's text -----------------------------------------------------------------------


def test_the_body_reads_as_card_plan_changes_and_verification() -> None:
    body = pull_request_body("1. Cap the delay\n2. Add jitter", "Capped backoff in retry.py", "pytest: 212 passed",
                             "Retry failed webhook deliveries", "https://github.com/orgs/acme/projects/3?pane=issue")
    sections = [line for line in body.splitlines() if line.startswith("## ")]
    assert sections == ["## Card", "## Plan", "## What changed", "## How it was verified"]
    assert "**Retry failed webhook deliveries**" in body
    assert "https://github.com/orgs/acme/projects/3?pane=issue" in body
    for text in ("1. Cap the delay\n2. Add jitter", "Capped backoff in retry.py", "pytest: 212 passed"):
        assert text in body


def test_the_body_is_bounded_and_keeps_short_sections_whole() -> None:
    plan = "Plan line\n" * 5000
    log = "\n".join(f"tests/test_{i}.py::test_case PASSED" for i in range(3000)) + "\n===== 1 failed, 2999 passed ====="
    body = pull_request_body(plan, "Small change.", log, "T" * 1000, None)
    assert len(body) <= PR_BODY_BUDGET
    assert "Small change." in body
    assert "1 failed, 2999 passed" in body   # a test run's end says how it went
    assert body.count("characters cut") == 2
    assert "T" * 300 not in body   # the card title is bounded too


def test_a_cut_inside_a_code_block_closes_it() -> None:
    verification = "Ran:\n```\n" + "line of output\n" * 4000 + "```\nAll green."
    body = pull_request_body("plan", "summary", verification, "Card", None)
    fences = [line for line in body.splitlines() if line.lstrip().startswith("```")]
    assert len(fences) % 2 == 0 and body.rstrip().endswith("</sub>")


def test_the_body_defuses_marker_lookalikes_and_unsafe_links() -> None:
    body = pull_request_body(f"plan\n{HIDDEN}", "", "", "Card", "javascript:alert(1)")
    assert HIDDEN not in body and "cardloop (quoted):" in body
    assert "javascript:" not in body
    assert "_Nothing recorded._" in body


def test_concurrent_ensures_leave_one_pull_request(fake: FakeGitHub) -> None:
    results: list[PullRequestResult] = []
    clients = [PullRequests(fake.api_url, TOKEN, request_interval=None, write_interval=None) for _ in range(3)]

    def run(c: PullRequests) -> None:
        results.append(ensure(c))

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for c in clients:
        c.close()
    assert len(results) == 3 and len({r.number for r in results}) == 1
    assert sum(r.created for r in results) == 1 and len(fake.open_pulls(REPO)) == 1


# -- reviews ---------------------------------------------------------------------------------------

RETRY = "app/webhooks/retry.py"
REVIEW_MARK = "review:PAY-142:1"
REVIEW_HIDDEN = f"<!-- cardloop:{REVIEW_MARK} -->"


def review(prs: PullRequests, number: int, comments: list[ReviewComment], **overrides: Any) -> ReviewResult:
    args: dict[str, Any] = {"body": "Two things before this can merge.", "comments": comments,
                            "marker": REVIEW_MARK}
    args.update(overrides)
    return prs.review(REPO, number, **args)


def review_posts(fake: FakeGitHub) -> list[Seen]:
    return [s for s in fake.requests_to(r"/pulls/\d+/reviews$") if s.method == "POST"]


@pytest.fixture
def pr(fake: FakeGitHub) -> dict[str, Any]:
    return fake.new_pull(REPO, head=BRANCH, base="main", title="PAY-142", body="")


def test_a_review_is_posted_once_then_found_by_its_marker(fake: FakeGitHub, prs: PullRequests,
                                                          pr: dict[str, Any]) -> None:
    fake.diff_lines[(REPO, pr["number"])] = {RETRY: set(range(48, 64))}
    comments = [ReviewComment(RETRY, 56, "Cap at max_delay before the jitter."),
                ReviewComment(RETRY, 60, "`random.uniform(0, raw)` can return 0: a retry storm.")]
    first = review(prs, pr["number"], comments)
    (posted,) = fake.reviews[(REPO, pr["number"])]
    assert first == ReviewResult(review_id=posted["id"], url=posted["html_url"], created=True, comments=2,
                                 moved_to_body=0)
    assert first.url == f"https://github.com/{REPO}/pull/{pr['number']}#pullrequestreview-{posted['id']}"
    assert posted["state"] == "COMMENTED" and posted["commit_id"] == PR_SHA
    assert posted["body"] == f"Two things before this can merge.\n\n{REVIEW_HIDDEN}"
    lines = fake.review_comments[(REPO, pr["number"])]
    assert [(c["path"], c["line"], c["side"], c["pull_request_review_id"]) for c in lines] == [
        (RETRY, 56, "RIGHT", posted["id"]), (RETRY, 60, "RIGHT", posted["id"])]
    (sent,) = review_posts(fake)
    assert sent.body["event"] == "COMMENT" and sent.body["commit_id"] == pr["head"]["sha"]
    assert sent.body["comments"][0] == {"path": RETRY, "line": 56, "side": "RIGHT",
                                        "body": "Cap at max_delay before the jitter."}

    # The activity retried (or the stage ran again): the review is found, nothing is posted.
    again = review(prs, pr["number"], [*comments, ReviewComment(RETRY, 50, "and another")])
    assert again == ReviewResult(review_id=posted["id"], url=posted["html_url"], created=False, comments=2)
    assert len(fake.reviews[(REPO, pr["number"])]) == 1 and len(review_posts(fake)) == 1


def test_a_persons_review_carrying_the_marker_is_not_taken_for_ours(fake: FakeGitHub, prs: PullRequests,
                                                                    pr: dict[str, Any]) -> None:
    key = (REPO, pr["number"])
    theirs = fake.review_json(REPO, pr["number"], 4_000_001, author="mallory", state="COMMENTED",
                              body=f"lgtm\n\n{REVIEW_HIDDEN}", submitted=datetime.now(UTC))
    fake.reviews[key] = [theirs]
    done = review(prs, pr["number"], [ReviewComment(RETRY, 56, "Cap it.")])
    assert done.created and done.review_id != theirs["id"] and len(review_posts(fake)) == 1
    assert [r["user"]["login"] for r in fake.reviews[key]] == ["mallory", fake.login]


def test_the_marked_review_is_found_on_a_later_page(fake: FakeGitHub, prs: PullRequests, pr: dict[str, Any]) -> None:
    fake.max_per_page = 2
    key = (REPO, pr["number"])
    t = datetime.now(UTC)
    fake.reviews[key] = [
        fake.review_json(REPO, pr["number"], 801, author="priya", state="CHANGES_REQUESTED", body="No.", submitted=t),
        fake.review_json(REPO, pr["number"], 802, author="tomasz", state="COMMENTED",
                         body=f"> {REVIEW_HIDDEN}\n\nquoting the bot", submitted=t),
        fake.review_json(REPO, pr["number"], 803, author="priya", state="APPROVED", body="", submitted=t),
        fake.review_json(REPO, pr["number"], 804, author=fake.login, state="COMMENTED",
                         body=f"Earlier.\n\n{REVIEW_HIDDEN}", submitted=t),
    ]
    result = review(prs, pr["number"], [ReviewComment(RETRY, 1, "x")])
    assert (result.review_id, result.created, result.comments) == (804, False, 0)
    pages = [s.query.get("page", "1") for s in fake.requests_to(r"/pulls/\d+/reviews$")]
    assert pages == ["1", "2"] and review_posts(fake) == []


def test_comments_outside_the_diff_move_into_the_review_body(fake: FakeGitHub, prs: PullRequests,
                                                             pr: dict[str, Any]) -> None:
    fake.diff_lines[(REPO, pr["number"])] = {RETRY: {54, 55, 56, 57, 58}, "app/settings.py": {20}}
    comments = [ReviewComment(RETRY, 56, "Cap before the jitter."),
                ReviewComment(RETRY, 200, "This helper is dead code now.\n\n```python\ndef old(): ...\n```"),
                ReviewComment("README.md", 3, "Document the new setting."),
                ReviewComment("app/settings.py", 20, "Accept `30s` like the other durations.")]
    result = review(prs, pr["number"], comments)
    assert (result.created, result.comments, result.moved_to_body) == (True, 2, 2)

    # One review on the server: the in-diff comments on their lines, the others in its body.
    (posted,) = fake.reviews[(REPO, pr["number"])]
    assert result.review_id == posted["id"]
    lines = fake.review_comments[(REPO, pr["number"])]
    assert [(c["path"], c["line"]) for c in lines] == [(RETRY, 56), ("app/settings.py", 20)]
    assert posted["body"] == (
        "Two things before this can merge.\n\n"
        f"{MOVED_HEADING}\n\n"
        f"- `{RETRY}:200`: This helper is dead code now.\n\n  ```python\n  def old(): ...\n  ```\n"
        "- `README.md:3`: Document the new setting.\n\n"
        f"{REVIEW_HIDDEN}")
    # GitHub refused the first post (422, without saying which line); the files said which.
    assert len(review_posts(fake)) == 2 and len(fake.requests_to(r"/pulls/\d+/files$")) == 1
    assert [c["line"] for c in review_posts(fake)[0].body["comments"]] == [56, 200, 3, 20]

    found = review(prs, pr["number"], comments)
    assert found == ReviewResult(posted["id"], posted["html_url"], created=False, comments=2, moved_to_body=2)


def test_over_fifty_comments_the_rest_go_into_the_body(fake: FakeGitHub, prs: PullRequests,
                                                       pr: dict[str, Any]) -> None:
    comments = [ReviewComment(RETRY, n, f"remark {n}") for n in range(1, 56)]
    result = review(prs, pr["number"], comments)
    assert (result.created, result.comments, result.moved_to_body) == (True, MAX_REVIEW_COMMENTS, 5)
    assert [c["line"] for c in fake.review_comments[(REPO, pr["number"])]] == list(range(1, 51))
    (posted,) = fake.reviews[(REPO, pr["number"])]
    listed = [line for line in posted["body"].splitlines() if line.startswith("- ")]
    assert listed == [f"- `{RETRY}:{n}`: remark {n}" for n in range(51, 56)]
    assert len(review_posts(fake)) == 1


def test_a_line_outside_the_diff_frees_a_place_for_a_comment_past_fifty(fake: FakeGitHub, prs: PullRequests,
                                                                        pr: dict[str, Any]) -> None:
    fake.diff_lines[(REPO, pr["number"])] = {RETRY: set(range(1, 101)) - {3}}
    comments = [ReviewComment(RETRY, n, f"remark {n}") for n in range(1, 56)]
    result = review(prs, pr["number"], comments)
    assert (result.comments, result.moved_to_body) == (50, 5)
    assert [c["line"] for c in fake.review_comments[(REPO, pr["number"])]] == [1, 2, *range(4, 52)]
    listed = [line for line in fake.reviews[(REPO, pr["number"])][0]["body"].splitlines() if line.startswith("- ")]
    assert listed == [f"- `{RETRY}:{n}`: remark {n}" for n in (3, 52, 53, 54, 55)]


def test_when_github_still_refuses_the_lines_every_comment_goes_into_the_body(fake: FakeGitHub, prs: PullRequests,
                                                                              pr: dict[str, Any]) -> None:
    # The files say both lines are in the diff, yet GitHub refuses them (the head moved on).
    fake.diff_lines[(REPO, pr["number"])] = {RETRY: {10, 11}}
    fake.fail(r"/reviews$", 422, "Unprocessable Entity", method="POST", times=1,
              errors=["Pull request review thread line must be part of the diff"])
    result = review(prs, pr["number"], [ReviewComment(RETRY, 10, "a"), ReviewComment(RETRY, 11, "b")])
    assert (result.created, result.comments, result.moved_to_body) == (True, 0, 2)
    assert [len(s.body["comments"]) for s in review_posts(fake)] == [2, 0]   # the same post is not tried twice
    assert fake.review_comments.get((REPO, pr["number"]), []) == []
    assert "- `app/webhooks/retry.py:11`: b" in fake.reviews[(REPO, pr["number"])][0]["body"]


def test_a_review_with_only_a_body(fake: FakeGitHub, prs: PullRequests, pr: dict[str, Any]) -> None:
    result = review(prs, pr["number"], [], body="Looks right; one question in the thread.")
    assert (result.created, result.comments, result.moved_to_body) == (True, 0, 0)
    assert review_posts(fake)[0].body["comments"] == []


def test_a_review_whose_answer_was_lost_is_found_on_the_retry(fake: FakeGitHub, pr: dict[str, Any]) -> None:
    def slow_post(seen: Seen) -> None:
        if seen.method == "POST" and seen.path.endswith("/reviews"):
            time.sleep(1.6)

    fake.hooks.append(slow_post)
    with PullRequests(fake.api_url, TOKEN, timeout=1, request_interval=None, write_interval=None) as prs:
        with pytest.raises(UpstreamError) as exc:
            review(prs, pr["number"], [ReviewComment(RETRY, 5, "x")])
        assert exc.value.kind == "timeout" and exc.value.retryable
        deadline = time.monotonic() + 5
        while not fake.reviews.get((REPO, pr["number"])) and time.monotonic() < deadline:
            time.sleep(0.05)
        fake.hooks.clear()
        again = review(prs, pr["number"], [ReviewComment(RETRY, 5, "x")])
    assert (again.created, again.comments) == (False, 1) and len(fake.reviews[(REPO, pr["number"])]) == 1


def test_another_refusal_of_a_review_is_final(fake: FakeGitHub, prs: PullRequests, pr: dict[str, Any]) -> None:
    fake.fail(r"/reviews$", 422, "Unprocessable Entity", method="POST",
              errors=["Can not request changes on your own pull request"])
    with pytest.raises(UpstreamError) as exc:
        review(prs, pr["number"], [ReviewComment(RETRY, 5, "x")])
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == ("invalid_request", False, 422)
    assert "Can not request changes" in str(exc.value) and len(review_posts(fake)) == 1


def test_a_review_with_a_rejected_token_is_final_and_never_names_it(fake: FakeGitHub, pr: dict[str, Any]) -> None:
    wrong = "ghp_WrongToken000000000000000000000000"
    with (PullRequests(fake.api_url, Secret(wrong, "GITHUB_TOKEN"), request_interval=None,
                       write_interval=None) as prs, pytest.raises(UpstreamError) as exc):
        review(prs, pr["number"], [ReviewComment(RETRY, 5, "x")])
    err = exc.value
    assert (err.kind, err.retryable, err.status) == ("auth", False, 401) and "Bad credentials" in str(err)
    assert wrong not in str(err) and wrong not in repr(err)
    assert fake.reviews == {}


def test_a_review_on_a_missing_pull_request_is_not_found(fake: FakeGitHub, prs: PullRequests) -> None:
    with pytest.raises(UpstreamError) as exc:
        review(prs, 999, [ReviewComment(RETRY, 5, "x")])
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == ("not_found", False, 404)


def test_a_server_error_posting_a_review_is_retryable(fake: FakeGitHub, prs: PullRequests,
                                                      pr: dict[str, Any]) -> None:
    fake.fail(r"/reviews$", 502, "Server Error", method="POST")
    with pytest.raises(UpstreamError) as exc:
        review(prs, pr["number"], [ReviewComment(RETRY, 5, "x")])
    assert (exc.value.kind, exc.value.retryable, exc.value.status) == ("server", True, 502)


def test_a_review_without_a_token_is_not_configured(fake: FakeGitHub) -> None:
    with PullRequests(fake.api_url, None, request_interval=None, write_interval=None) as prs, \
            pytest.raises(UpstreamError) as exc:
        review(prs, 1, [ReviewComment(RETRY, 5, "x")])
    assert exc.value.kind == "not_configured" and fake.seen == []


@pytest.mark.parametrize("overrides", [
    {"comments": [ReviewComment("", 5, "x")]},
    {"comments": [ReviewComment("   ", 5, "x")]},
    {"comments": [ReviewComment("app/x.py\nREADME.md", 5, "x")]},
    {"comments": [ReviewComment(RETRY, 0, "x")]},
    {"comments": [ReviewComment(RETRY, -2, "x")]},
    {"comments": [ReviewComment(RETRY, True, "x")]},
    {"comments": [ReviewComment(RETRY, "5", "x")]},   # type: ignore[arg-type]
    {"comments": [ReviewComment(RETRY, 5, "")]},
    {"comments": [ReviewComment(RETRY, 5, " \n ")]},
    {"comments": [ReviewComment(RETRY, 5, "fine"), {"path": RETRY, "line": 5, "body": "x"}]},
    {"comments": "app/x.py:5 fix this"},
    {"comments": [], "body": "  "},
    {"body": None},
    {"marker": ""},
    {"marker": "x-->y"},
])
def test_a_review_that_cannot_work_raises_value_error_before_any_call(fake: FakeGitHub, prs: PullRequests,
                                                                      overrides: dict[str, Any]) -> None:
    args: dict[str, Any] = {"body": "b", "comments": [ReviewComment(RETRY, 5, "x")], "marker": REVIEW_MARK}
    args.update(overrides)
    with pytest.raises(ValueError):
        prs.review(REPO, 1, **args)
    for repo, number in (("payments-api", 1), (REPO, 0), (REPO, True)):
        with pytest.raises(ValueError):
            prs.review(repo, number, body="b", comments=[], marker=REVIEW_MARK)
    assert fake.seen == []


def test_the_patch_says_which_head_lines_a_comment_may_name() -> None:
    patch = ("@@ -48,7 +48,9 @@ class RetryPolicy:\n"
             "     def delay_for(self, attempt: int) -> float:\n"
             "-        return self.base_delay * self.factor ** (attempt - 1)\n"
             "+        raw = self.base_delay * self.factor ** (attempt - 1)\n"
             "+        capped = min(raw, self.max_delay)\n"
             "+        return capped\n"
             "\n"
             "@@ -120,2 +122,3 @@ def parse_retry_after(value: str) -> float:\n"
             "     return float(value)\n"
             "+\n"
             "\\ No newline at end of file")
    assert patch_lines(patch) == {48, 49, 50, 51, 52, 122, 123}
    assert patch_lines(None) == set() and patch_lines("") == set()


def test_moved_comments_are_counted_back_from_the_body() -> None:
    moved = [ReviewComment("a.py", 1, "one\n- `b.py:2`: not an item of ours, indented"), ReviewComment("``x", 2, "two")]
    body = review_body("Intro.\n\n- `z.py:9`: the author's own list", moved)
    assert moved_in_body(body) == 2 and moved_in_body("no list") == 0
    assert "- ``` ``x:2 ```: two" in body
