"""What GitHub Actions says about one pushed commit: the evidence error_fixing waits for.

    ci_for_commit(client, "acme/api", sha) -> CIStatus(state, runs, failing)

`state`: "none" (no workflow run for the commit, yet or at all), "pending" (a run has not
completed), "failure" (a completed run failed, timed out, was cancelled or needs action) or
"success". For a failure, `failing` holds each failed job's excerpt exactly as the
github_actions context source builds it (header, the failing step's error lines), so the agent
reads its CI failure the way it reads it in a prompt.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Literal

from cardloop.integrations.sources.github.actions import GitHubActionsSource
from cardloop.integrations.sources.github.client import GitHubClient, Target
from cardloop.integrations.sources.github.common import FAILED_CONCLUSIONS

State = Literal["none", "pending", "failure", "success"]
# A run that ended so did not pass: its commit is not proven (the jobs' logs say why for the first three).
NOT_PASSING = FAILED_CONCLUSIONS | {"cancelled", "action_required"}
MAX_RUNS = 20
MAX_FAILED_JOBS = 5


@dataclass(frozen=True)
class RunSummary:
    name: str
    status: str
    conclusion: str | None
    url: str


@dataclass(frozen=True)
class CIStatus:
    state: State
    runs: tuple[RunSummary, ...] = ()
    failing: tuple[str, ...] = field(default=())  # one excerpt per failed job

    def describe(self) -> str:
        if not self.runs:
            return "no GitHub Actions run for this commit"
        return "; ".join(f"{r.name}: {r.conclusion or r.status}" for r in self.runs)


def ci_for_commit(client: GitHubClient, repo: str, sha: str, *, excerpt_tokens: int = 3_000) -> CIStatus:
    """Raises UpstreamError (from the client) when GitHub cannot be read."""
    if not sha or len(sha) < 7:
        raise ValueError(f"not a commit sha: {sha!r}")
    with client.calling(f"reading {repo}"):
        gh_repo = client.gh.get_repo(repo)
    with client.calling(f"listing the workflow runs of {repo} at {sha[:12]}"):
        runs = list(itertools.islice(gh_repo.get_workflow_runs(head_sha=sha), MAX_RUNS))
    summaries = tuple(RunSummary(r.name or "workflow", r.status or "", r.conclusion, r.html_url or "") for r in runs)
    if not runs:
        return CIStatus("none")
    if any(r.status != "completed" for r in runs):
        return CIStatus("pending", summaries)
    failed = [r for r in runs if r.conclusion in NOT_PASSING]
    if not failed:
        return CIStatus("success", summaries)
    source = GitHubActionsSource(client, excerpt_tokens=excerpt_tokens)
    target = Target(repo=gh_repo, name=repo, branch=None, pr=None)
    excerpts: list[str] = []
    for run in failed:
        with client.calling(f"listing jobs of workflow run {run.id} in {repo}"):
            jobs = [j for j in run.jobs() if j.conclusion in FAILED_CONCLUSIONS]
        for job in jobs:
            if len(excerpts) >= MAX_FAILED_JOBS:
                break
            item, _log, _note = source._job_item(target, run, job)
            excerpts.append(client.scrub(item.content))
    return CIStatus("failure", summaries, tuple(excerpts))
