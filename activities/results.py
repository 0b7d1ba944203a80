"""results.pull_request and results.comment: the card's work where people look, exactly once.

After a write stage completes with its work verified and pushed, the card's branch gets a pull
request: found by its head branch and updated, else created, with the plan, what changed and
how it was verified in its body and a hidden marker (`<!-- cardloop:<card>/pull-request -->`).
The result is recorded under the stage run's key (activities/once.py): a retried activity
returns the recorded pull request instead of asking GitHub again, and GitHub's own lookup by head
branch keeps a second one from being opened even when the record was lost with a worker.

A stage run that ends completed, blocked or out of budget leaves one comment (the stage, its
outcome and reason, the plan or the review, the branch) on the card's GitHub issue or pull
request (the card's URL), else on the branch's pull request: marked
`<!-- cardloop:<card>/<run>/<stage> -->`, so a retry edits the comment it made instead of adding one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import stored_fields
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.activities.once import recorded_once
from cardloop.contracts import names
from cardloop.contracts.payloads import (
    CIInput,
    CIResult,
    CommentInput,
    CommentOutcome,
    PullRequestInput,
    PullRequestOutcome,
    ReviewInput,
    ReviewPosted,
)
from cardloop.contracts.secrets import Secret
from cardloop.integrations.access import github_token
from cardloop.integrations.github_checks import read_ci
from cardloop.integrations.github_results import PullRequests, ReviewComment, pull_request_body, thread_of
from cardloop.integrations.sources.github.client import GitHubClient
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card
from cardloop.prompts.redact import DEFAULT_REDACTOR

# What a comment quotes of a stage's reply (the plan, the review) at most.
QUOTE_CHARS = 6_000
OUTCOME_WORDS = {"completed": "completed", "blocked": "is blocked", "budget_exhausted": "ran out of budget"}


R = TypeVar("R", PullRequestOutcome, CommentOutcome)


def _redacted(text: str) -> str:
    return DEFAULT_REDACTOR.redact(text).text


def comment_body(inp: CommentInput, quoted: str) -> str:
    lines = [f"**cardloop · {inp.stage}** (run {inp.run}) {OUTCOME_WORDS.get(inp.outcome, inp.outcome)}.", ""]
    if inp.reason:
        lines += [_redacted(inp.reason)[:2_000], ""]
    if quoted:
        text = _redacted(quoted)
        if len(text) > QUOTE_CHARS:
            text = text[:QUOTE_CHARS] + " […]"
        summary = f"<details open><summary>The {inp.stage} agent's last reply</summary>"
        lines += [summary, "", text, "", "</details>", ""]
    if inp.branch:
        pr = f", pull request {_redacted(inp.pull_request)}" if inp.pull_request else ""
        lines.append(f"Branch `{_redacted(inp.branch)}`{pr}.")
    return "\n".join(lines).strip()


class ResultsActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    # --- what every GitHub result needs --------------------------------------------------------

    def _card(self, card_key: str) -> Card:
        return stored_fields(self.rt.store, card_key)

    def _token(self, card: Card, repo: str | None) -> Secret | str:
        """The tenant's GitHub token for `repo`, or a sentence saying why GitHub is not used."""
        if not repo:
            return "the card names no repository"
        try:
            token = github_token(self.rt.config, card.tenant, repo)
        except UpstreamError as err:
            return str(err)
        return token if token is not None else f"no GitHub token ({self.rt.config.sources.github.token_env} is not set)"

    def _writer(self, token: Secret) -> PullRequests:
        g = self.rt.config.sources.github
        return PullRequests(g.api_url, token, timeout=g.timeout)

    def _once(self, card_key: str, key: str, kind: str, result: type[R], act: Callable[[], R]) -> R:
        """activities/once.py with the result recorded as a side effect (store.record_effect)."""
        return recorded_once(self.rt.store, card_key, key, kind, result, act)

    # --- activities ----------------------------------------------------------------------------

    @activity.defn(name=names.PULL_REQUEST)
    def pull_request(self, inp: PullRequestInput) -> PullRequestOutcome:
        card = self._card(inp.card_key)
        token = self._token(card, card.repo)
        if isinstance(token, str):
            if token.startswith("no GitHub token"):
                token += f": the branch {inp.branch} is pushed, open its pull request by hand"
            return PullRequestOutcome(skipped=token)
        repo = card.repo or ""

        def act() -> PullRequestOutcome:
            plan = self.rt.store.last_reply(inp.card_key, "planning")
            body = pull_request_body(plan=_redacted(plan.content) if plan else "", summary=_redacted(inp.summary),
                                     verification=_redacted(inp.verification), card_title=_redacted(card.title),
                                     card_url=_redacted(card.url) if card.url else None)
            with self._writer(token) as client, _github_failure(f"pull request for {inp.branch}"):
                done = call_with_heartbeat(lambda: client.ensure(
                    repo, head=inp.branch, base=None, title=_redacted(f"{card.id}: {card.title}")[:250], body=body,
                    marker=f"{inp.card_key}/pull-request"), detail=f"pull request for {inp.branch}")
            return PullRequestOutcome(number=done.number, url=done.url, created=done.created)

        stored = self._once(inp.card_key, inp.key, "pull_request", PullRequestOutcome, act)
        activity.logger.info("pull request for %s: %s", inp.branch, json.dumps(stored.model_dump()))
        return stored

    @activity.defn(name=names.COMMENT)
    def comment(self, inp: CommentInput) -> CommentOutcome:
        card = self._card(inp.card_key)
        target = thread_of(card.url) or thread_of(inp.pull_request)
        if target is None:
            return CommentOutcome(skipped="the card links no GitHub issue or pull request")
        repo, number = target
        token = self._token(card, repo)
        if isinstance(token, str):
            return CommentOutcome(skipped=token)

        def act() -> CommentOutcome:
            reply = self.rt.store.last_reply(inp.card_key, inp.stage) if inp.stage in ("planning", "review") else None
            body = comment_body(inp, reply.content if reply else "")
            with self._writer(token) as client, _github_failure(f"comment on {repo}#{number}"):
                cid = call_with_heartbeat(lambda: client.comment(repo, number, body=body, marker=inp.key),
                                          detail=f"comment on {repo}#{number}")
            return CommentOutcome(comment_id=cid, target=f"{repo}#{number}")

        return self._once(inp.card_key, inp.key, "comment", CommentOutcome, act)

    @activity.defn(name=names.CI_STATUS)
    def ci_status(self, inp: CIInput) -> CIResult:
        """GitHub Actions' verdict on `inp.sha` (read only: a retry just reads again)."""
        card = self._card(inp.card_key)
        token = self._token(card, card.repo)
        if isinstance(token, str):
            return CIResult(state="skipped", skipped=token)
        g = self.rt.config.sources.github
        with GitHubClient(g.api_url, token=token, graphql_url=g.graphql_url or None, timeout=g.timeout) as client, \
                _github_failure(f"CI of {inp.sha[:12]}"):
            status = call_with_heartbeat(lambda: read_ci(client, card.repo or "", inp.sha),
                                         detail=f"reading CI of {inp.sha[:12]}")
        failing = "\n\n".join(_redacted(x) for x in status.failing)
        return CIResult(state=status.state, summary=status.describe()[:2_000], failing=failing[:24_000])

    @activity.defn(name=names.REVIEW)
    def review(self, inp: ReviewInput) -> ReviewPosted:
        """The review stage's line comments on the branch's open pull request, as one review."""
        card = self._card(inp.card_key)
        token = self._token(card, card.repo)
        if isinstance(token, str):
            return ReviewPosted(skipped=token)
        repo = card.repo or ""
        comments = [ReviewComment(_redacted(c.path), c.line, _redacted(c.body)) for c in inp.comments]

        def post(client: PullRequests) -> ReviewPosted:
            number = client.open_pull(repo, inp.branch)
            if number is None:
                return ReviewPosted(skipped=f"no open pull request from {inp.branch} in {repo}")
            done = client.review(repo, number, body=_redacted(inp.body), comments=comments, marker=inp.key)
            return ReviewPosted(url=done.url, inline=done.comments, in_body=done.moved_to_body)

        with self._writer(token) as client, _github_failure(f"review for {inp.branch}"):
            return call_with_heartbeat(lambda: post(client), detail=f"review on the pull request from {inp.branch}")


@contextmanager
def _github_failure(what: str) -> Iterator[None]:
    """GitHub's refusal or outage as the activity's error: retried when GitHub says it may pass,
    after the wait GitHub asked for (Retry-After, the rate limit's reset) as Temporal's
    next_retry_delay rather than the policy's backoff, which would give up before a limit lifts."""
    try:
        yield
    except UpstreamError as err:
        delay = timedelta(seconds=err.retry_after) if err.retryable and err.retry_after else None
        raise ApplicationError(f"{what}: {_redacted(str(err))}", type="GitHubError",
                               non_retryable=not err.retryable, next_retry_delay=delay) from None
