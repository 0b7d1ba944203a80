"""results.pull_request: the card's branch as a pull request on GitHub, exactly once.

After a write stage completes with its work verified and pushed, the card's branch gets a pull
request: found by its head branch and updated, else created, with the plan, what changed and
how it was verified in its body and a hidden marker (`<!-- cardloop:<card>/pull-request -->`).
The result is recorded under the stage run's key (activities/once.py): a retried activity
returns the recorded pull request instead of asking GitHub again, and GitHub's own lookup by head
branch keeps a second one from being opened even when the record was lost with a worker.
"""

from __future__ import annotations

import json

from temporalio import activity
from temporalio.exceptions import ApplicationError

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import card_not_found
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.activities.once import exactly_once
from cardloop.contracts import names
from cardloop.contracts.payloads import PullRequestInput, PullRequestOutcome
from cardloop.integrations.access import github_token
from cardloop.integrations.github_results import PullRequests, pull_request_body
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.redact import DEFAULT_REDACTOR


def _redacted(text: str) -> str:
    return DEFAULT_REDACTOR.redact(text).text


class ResultsActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name=names.PULL_REQUEST)
    def pull_request(self, inp: PullRequestInput) -> PullRequestOutcome:
        rt = self.rt
        card = rt.store.get_card(inp.card_key)
        if card is None:
            raise card_not_found(inp.card_key)
        if not card.repo:
            return PullRequestOutcome(skipped="the card names no repository")
        try:
            token = github_token(rt.config, card.tenant, card.repo)
        except UpstreamError as err:
            return PullRequestOutcome(skipped=str(err))
        if token is None:
            env = rt.config.sources.github.token_env
            return PullRequestOutcome(skipped=f"no GitHub token ({env} is not set): the branch "
                                              f"{inp.branch} is pushed, open its pull request by hand")
        store = rt.store

        def lookup() -> PullRequestOutcome | None:
            found = store.effect(inp.card_key, inp.key)
            return None if found is None else PullRequestOutcome.model_validate_json(found.result)

        def act() -> PullRequestOutcome:
            plan = store.last_reply(inp.card_key, "planning")
            body = pull_request_body(plan=_redacted(plan.content) if plan else "", summary=_redacted(inp.summary),
                                     verification=_redacted(inp.verification), card_title=card.title,
                                     card_url=card.url)
            client = PullRequests(rt.config.sources.github.api_url, token, timeout=rt.config.sources.github.timeout)
            try:
                done = call_with_heartbeat(lambda: client.ensure(
                    card.repo or "", head=inp.branch, base=None, title=f"{card.id}: {card.title}"[:250],
                    body=body, marker=f"{inp.card_key}/pull-request"), detail=f"pull request for {inp.branch}")
            except UpstreamError as err:
                message = _redacted(str(err))
                raise ApplicationError(f"pull request for {inp.branch}: {message}", type="GitHubError",
                                       non_retryable=not err.retryable) from None
            finally:
                client.close()
            return PullRequestOutcome(number=done.number, url=done.url, created=done.created)

        def record(outcome: PullRequestOutcome) -> bool:
            return store.record_effect(inp.card_key, inp.key, "pull_request", outcome.model_dump_json())

        stored = exactly_once(lookup, act, record, what=f"pull request {inp.key}").value
        activity.logger.info("pull request for %s: %s", inp.branch, json.dumps(stored.model_dump()))
        return stored
