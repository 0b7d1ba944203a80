"""activities/results.py against a loopback GitHub (tests/…/fake_github.py): what cardloop
writes there from card text is redacted, and GitHub's own wait reaches Temporal's retry."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.results import ResultsActivities
from cardloop.activities.deps import ActivityDeps
from cardloop.contracts.payloads import CommentInput, LineComment, PullRequestInput, ReviewInput
from cardloop.prompts.card import Card
from cardloop.store import Store
from tests.cardloop.integrations.sources.fake_github import REPO, TOKEN, FakeGitHub, serving
from tests.stack import make_config

KEY = "acme/github/PAY-7"
BRANCH = "card/PAY-7"
SECRET = "ghp_" + "Ab3" * 12  # a GitHub token pasted into the card
ISSUE = 7


@dataclasses.dataclass
class Env:
    github: FakeGitHub
    store: Store
    results: ResultsActivities

    def run(self, fn: Any, arg: Any, *, attempt: int = 1) -> Any:
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, attempt=attempt, scheduled_time=datetime.now(UTC),
                                       current_attempt_scheduled_time=datetime.now(UTC))
        return env.run(fn, arg)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with serving() as github:
        github.issues[(REPO, ISSUE)] = {"number": ISSUE}
        store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
        store.upsert_card(KEY, Card.model_validate({
            "id": "PAY-7", "tenant": "acme", "board": "github", "repo": REPO, "branch": BRANCH,
            "title": f"Rotate the leaked token {SECRET}",
            "url": f"https://github.com/{REPO}/issues/{ISSUE}?token={SECRET}"}))
        config = make_config("127.0.0.1:1", "unused", CARDLOOP_SOURCES__GITHUB__API_URL=github.api_url,
                             CARDLOOP_GITHUB_TOKEN=TOKEN)
        rt = ActivityDeps.build(config, store)
        try:
            yield Env(github, store, ResultsActivities(rt))
        finally:
            rt.close()
            store.close()


def sent(github: FakeGitHub) -> str:
    """Everything cardloop sent GitHub, as text."""
    return "\n".join(repr(s.body) for s in github.seen if s.body is not None)


def test_a_secret_in_the_cards_title_and_url_never_reaches_github(env: Env) -> None:
    opened = env.run(env.results.pull_request, PullRequestInput(card_key=KEY, key=f"{KEY}/1/coding/pr",
                                                                branch=BRANCH, summary="Rotated it."))
    assert opened.url
    said = env.run(env.results.comment, CommentInput(card_key=KEY, key=f"{KEY}/1/coding", stage="coding", run=1,
                                                     outcome="completed", branch=BRANCH,
                                                     pull_request=opened.url))
    assert said.target == f"{REPO}#{ISSUE}"
    env.run(env.results.review, ReviewInput(card_key=KEY, key=f"{KEY}/1/review/review", branch=BRANCH,
                                            body="ok", comments=[LineComment(path=f"{SECRET}.py", line=1,
                                                                             body="here")]))
    [pr] = env.github.open_pulls(REPO)
    assert pr["title"] == "PAY-7: Rotate the leaked token [REDACTED:github-token]"
    assert "Rotate the leaked token [REDACTED:github-token]" in pr["body"]
    assert f"/issues/{ISSUE}?token=[REDACTED" in pr["body"]  # the card's link, its secret cut
    assert env.github.reviews[(REPO, pr["number"])]  # the review went out too
    assert SECRET not in sent(env.github)


@pytest.mark.parametrize(("status", "headers", "wait"), [
    (429, {"Retry-After": "45"}, 45),
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "+120"}, 120),  # "+": from now
])
def test_a_rate_limit_passes_githubs_wait_to_temporal(env: Env, status: int, headers: dict[str, str],
                                                      wait: int) -> None:
    """Temporal's next attempt comes when GitHub said the limit lifts, not on the policy's short
    backoff; the message says what GitHub asked, not that a retry is coming."""
    if headers.get("x-ratelimit-reset", "").startswith("+"):
        headers = {**headers, "x-ratelimit-reset": str(int(time.time()) + int(headers["x-ratelimit-reset"]))}
    env.github.fail(r"/pulls$", status, "API rate limit exceeded", headers=headers, method="POST",
                    times=1)
    with pytest.raises(ApplicationError) as exc:
        env.run(env.results.pull_request, PullRequestInput(card_key=KEY, key=f"{KEY}/1/coding/pr", branch=BRANCH))
    err = exc.value
    assert not err.non_retryable and err.next_retry_delay is not None
    assert abs(err.next_retry_delay.total_seconds() - wait) <= 2
    assert "rate limit" in err.message and "retrying" not in err.message and "asks to wait" in err.message
    # The limit lifted: the next attempt opens the pull request, once.
    opened = env.run(env.results.pull_request, PullRequestInput(card_key=KEY, key=f"{KEY}/1/coding/pr",
                                                                branch=BRANCH), attempt=2)
    assert opened.number and len(env.github.open_pulls(REPO)) == 1


def test_the_results_policy_outlasts_a_secondary_rate_limit() -> None:
    """GitHub's secondary limits ask for a minute or more, sometimes several times over: the
    policy's attempts, each after GitHub's wait, cover a few minutes of it."""
    from workflows import policies

    retry = policies.RESULTS["retry_policy"]
    assert retry.maximum_attempts >= 8 and retry.maximum_interval >= timedelta(minutes=5)
