"""What issue 5 promises end to end: the sources' items, through the prompt core, give an
error_fixing prompt whose CI error lines and crashing pod's last lines come before the source
files; a review prompt with the unresolved threads; a testing prompt with the failed tests:
all within budget, with provenance, secrets redacted."""

from __future__ import annotations

from typing import Any

from cardloop.integrations.sources.base import SourceRequest
from cardloop.integrations.sources.github import (
    GitHubActionsSource,
    GitHubClient,
    GitHubReviewsSource,
    GitHubTestResultsSource,
)
from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
from cardloop.prompts.card import Card, ContextItem, ContextKind
from cardloop.prompts.settings import AssemblySettings
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter
from tests.cardloop.integrations.sources.fake_github import LOGS, REPO, card, seed_ci, seed_reviews, seed_tests
from tests.cardloop.integrations.sources.fake_kubernetes import add_crashloop

LEAKED = "ghp_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4"
SOURCE_FILE = ContextItem(kind=ContextKind.SOURCE_FILE, source=f"{REPO}@8c41f0d2b7e9:app/webhooks/retry.py",
                          title="app/webhooks/retry.py", content="   1 | def next_delay(attempt):\n   2 |     ...\n")


def assemble(c: Card, stage: Stage, items: list[ContextItem], counter: TokenCounter) -> Any:
    prompt = PromptAssembler(TemplateStore(), counter).assemble(
        AssemblyRequest(card=c.model_copy(update={"context": tuple(items)}), stage=stage), AssemblySettings())
    assert prompt.total_tokens <= prompt.budget["total"]
    return prompt


def test_error_fixing_prompt_has_ci_errors_and_pod_crash_before_source_files(
        fake, client: GitHubClient, cluster, make_source, counter: TokenCounter) -> None:
    log = (LOGS / "gha_pytest_failure.log").read_bytes().replace(
        b"##[group]Run pytest", f"##[group]Run pytest\n2024-05-15T10:00:00.0000000Z GITHUB_TOKEN={LEAKED}".encode(), 1)
    seed_ci(fake, pytest_log=log)
    add_crashloop(cluster)
    c = card()
    found = [*GitHubActionsSource(client, count=counter.count).gather(SourceRequest(c, Stage.ERROR_FIXING)).items,
             *make_source().gather(SourceRequest(c, Stage.ERROR_FIXING)).items, SOURCE_FILE]
    prompt = assemble(c, Stage.ERROR_FIXING, found, counter)
    last = prompt.conversation.turns[-1].text
    build, pod, src = (last.index(f'kind="{k}"') for k in ("build_log", "pod_log", "source_file"))
    assert build < pod < src
    assert "##[error]" in last and "FAILED tests/" in last
    assert "CrashLoopBackOff" in last and "Traceback" in last
    assert 'source="https://github.com/' in last and 'source="k8s:payments/pod/' in last  # provenance
    assert LEAKED not in last and "[REDACTED:" in last


def test_review_prompt_has_the_unresolved_threads(fake, client: GitHubClient, counter: TokenCounter) -> None:
    seed_reviews(fake)
    c = card(id="acme:payments-api#57", url=f"https://github.com/{REPO}/pull/57")
    items = GitHubReviewsSource(client, count=counter.count).gather(SourceRequest(c, Stage.REVIEW)).items
    last = assemble(c, Stage.REVIEW, [*items, SOURCE_FILE], counter).conversation.turns[-1].text
    assert "Cap at max_delay *before* the jitter" in last
    assert "swallows the 410" not in last  # resolved thread left out
    assert last.index('kind="review_comment"') < last.index('kind="source_file"')


def test_testing_prompt_has_the_failed_tests(fake, client: GitHubClient, counter: TokenCounter) -> None:
    seed_tests(fake)
    c = card()
    items = GitHubTestResultsSource(client, count=counter.count).gather(SourceRequest(c, Stage.TESTING)).items
    last = assemble(c, Stage.TESTING, list(items), counter).conversation.turns[-1].text
    assert "Tests: 3 failed of 7" in last
    assert "test_backoff_schedule_caps_at_max_delay" in last
