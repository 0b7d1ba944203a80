"""What `card show` and `card move --follow` print of a run's pull request and review: the link,
or why there is none (the note at the end of the reason, which a one-line view cuts)."""

from __future__ import annotations

from cardloop.app.follow import outcome_line, result_lines
from cardloop.contracts.payloads import StageRun

REFUSED = ("pull request for card/PAY-10: GitHub refused while opening a pull request from acme:card/PAY-10 into "
           "main of acme/payments-api (HTTP 403: Resource not accessible by integration): the token needs pull "
           "requests and issues: write")


def test_the_links_of_a_run_that_reached_github() -> None:
    run = StageRun(stage="review", run=2, outcome="completed", reason="Looks good.",
                   pull_request="https://github.com/acme/pay/pull/7",
                   review="https://github.com/acme/pay/pull/7#pullrequestreview-9")
    assert result_lines(run) == ["pull request: https://github.com/acme/pay/pull/7",
                                 "review: https://github.com/acme/pay/pull/7#pullrequestreview-9"]


def test_a_failed_pull_request_says_why_in_short_whatever_the_reason_before_it() -> None:
    run = StageRun(stage="coding", run=1, outcome="completed",
                   reason="x" * 500 + f" (the pull request could not be opened: {REFUSED})")
    assert result_lines(run) == ["pull request: not opened: GitHub refused (HTTP 403: Resource not accessible by "
                                 "integration): the token needs pull requests and issues: write"]
    assert run.reason in outcome_line(run)  # --follow's last line keeps the whole reason


def test_no_token_and_an_unposted_review() -> None:
    run = StageRun(stage="coding", run=1, outcome="completed",
                   reason="Done. (no pull request: no GitHub token (CARDLOOP_GITHUB_TOKEN is not set): the branch "
                          "card/X is pushed, open its pull request by hand) (review not posted: no open pull "
                          "request from card/X in acme/pay)")
    assert result_lines(run) == [
        "pull request: not opened: no GitHub token (CARDLOOP_GITHUB_TOKEN is not set): the branch card/X is "
        "pushed, open its pull request by hand",
        "review: not posted: no open pull request from card/X in acme/pay"]
    assert result_lines(StageRun(stage="planning", run=1, outcome="completed", reason="A plan.")) == []
