"""GitHub context sources: failed CI jobs' logs, open review threads and failed tests.

    GitHubClient            one PyGithub client (token or App installation), retries off (client.py)
      GitHubActionsSource   "github_actions": the failing step's log excerpt per failed job (actions.py)
      GitHubReviewsSource   "github_reviews": the PR's open review threads and reviews (reviews.py)
      GitHubTestResultsSource "github_tests": failed tests from JUnit artifacts or annotations (failed_tests.py)

Retries belong to Temporal: PyGithub gets `retry=None` and httpx has none of its own; failures
are UpstreamErrors classified by errors.py.
"""

from __future__ import annotations

from cardloop.integrations.sources.github.actions import GitHubActionsSource, excerpt_job_log
from cardloop.integrations.sources.github.client import GitHubClient, PullRef, parse_pr_ref
from cardloop.integrations.sources.github.failed_tests import GitHubTestResultsSource, parse_junit
from cardloop.integrations.sources.github.reviews import GitHubReviewsSource

__all__ = [
    "GitHubActionsSource",
    "GitHubClient",
    "GitHubReviewsSource",
    "GitHubTestResultsSource",
    "PullRef",
    "excerpt_job_log",
    "parse_junit",
    "parse_pr_ref",
]
