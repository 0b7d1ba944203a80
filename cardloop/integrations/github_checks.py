"""What GitHub Actions says about one pushed commit, read with nothing but a URL and a token.

    ci_status(api_url, token, "acme/payments-api", sha) -> CIStatus(state, runs, failing)

The workflow runs for the commit (GET /repos/{o}/{r}/actions/runs?head_sha=SHA), newest first;
of several runs of one workflow for one event (a pull request labelled, reopened) the newest
counts, as on the pull request's checks. `state`:

    "none"      no run for the commit: not yet (runs appear seconds after a push), or no
                workflow runs on it; the caller decides how long to wait
    "pending"   a run has not completed (queued, waiting, in progress)
    "failure"   a completed run ended failure, timed_out, cancelled, action_required or
                startup_failure
    "success"   every run completed otherwise (success, neutral, skipped)

For a failure, `failing` holds one excerpt per failed job (at most MAX_EXCERPT characters): the
workflow and job, the failing step, the job's URL and its log cut by the github_actions context
source's excerpting (excerpt_job_log: the failing step's section, its error lines and
tracebacks, head and tail), measured in characters here. The first MAX_LOGS failed jobs have
their logs read; the others are named without one. A failed run without a failed job (cancelled,
waiting for approval) gets one line saying so, so `failing` is never empty on a failure.

Failures leave as UpstreamError through GitHubClient (401/403/404 final; 429, 5xx, timeouts and
connection errors retryable); a job's log that GitHub no longer has (404/410) is noted in its
excerpt instead. No token: not_configured, before any call. A repository not "owner/name" or a
sha that is not a full commit sha (GitHub matches head_sha exactly: a short one finds nothing,
forever) raise ValueError before any call.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Literal

from github.WorkflowJob import WorkflowJob
from github.WorkflowRun import WorkflowRun

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.github_results import repo_name
from cardloop.integrations.sources.github.actions import _failed_step, excerpt_job_log
from cardloop.integrations.sources.github.client import GitHubClient
from cardloop.integrations.sources.github.common import FAILED_CONCLUSIONS, clip
from cardloop.integrations.upstream import UpstreamError

State = Literal["none", "pending", "success", "failure"]
# A completed run that did not pass: its commit is not proven.
NOT_PASSING = frozenset({"failure", "timed_out", "cancelled", "action_required", "startup_failure"})
MAX_EXCERPT = 4_000     # characters of one failed job's excerpt
MAX_RUNS = 100          # runs of one commit read (one page)
MAX_LOGS = 5            # failed jobs whose logs are read
MAX_LOG_BYTES = 16 * 1024 * 1024  # a longer log keeps its end (where it says how it failed)

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class RunSummary:
    name: str
    status: str              # queued, in_progress, completed, …
    conclusion: str | None   # None until completed
    url: str                 # the run's html_url


@dataclass(frozen=True)
class CIStatus:
    state: State
    runs: list[RunSummary] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)   # one excerpt per failed job

    def describe(self) -> str:
        if not self.runs:
            return "no GitHub Actions run for this commit"
        return "; ".join(f"{r.name}: {r.conclusion or r.status}" for r in self.runs)


def ci_status(api_url: str, token: Secret | str | None, repo: str, sha: str, *, timeout: float = 30.0,
              request_interval: float | None = 0.25, verify: bool | str = True) -> CIStatus:
    """The commit's CI state from its GitHub Actions runs. `api_url`: https://api.github.com
    or https://HOST/api/v3; `token` may read actions; `request_interval` spaces calls (tests
    pass None)."""
    full, _ = repo_name(repo)
    if not isinstance(sha, str) or not _SHA.fullmatch(sha.strip().lower()):
        raise ValueError(f"not a full commit sha (40 or 64 hex digits): {sha!r}")
    sha = sha.strip().lower()
    if not reveal(token):
        raise UpstreamError("no GitHub token to read GitHub Actions with", kind="not_configured", retryable=False)
    with GitHubClient(api_url, token=token, timeout=timeout, request_interval=request_interval,
                      verify=verify) as client:
        return read_ci(client, full, sha)


def read_ci(client: GitHubClient, repo: str, sha: str) -> CIStatus:
    """ci_status with a client the caller holds (and closes)."""
    with client.calling(f"reading repository {repo}"):
        gh_repo = client.gh.get_repo(repo)
    with client.calling(f"listing the workflow runs of {repo} at {sha[:12]}"):
        listed = list(itertools.islice(gh_repo.get_workflow_runs(head_sha=sha, exclude_pull_requests=True),
                                       MAX_RUNS))
        runs = _latest(listed)
        summaries = [RunSummary(r.name or "workflow", r.status or "", r.conclusion, r.html_url or "") for r in runs]
    if not runs:
        return CIStatus("none")
    if any(r.status != "completed" for r in runs):
        return CIStatus("pending", summaries)
    failed = [r for r in runs if r.conclusion in NOT_PASSING]
    if not failed:
        return CIStatus("success", summaries)

    failing: list[str] = []
    logs_left = MAX_LOGS
    for run in failed:
        workflow = run.name or "workflow"
        with client.calling(f"listing the jobs of workflow run {run.id} ({workflow}) in {repo}"):
            jobs = [j for j in run.jobs() if j.conclusion in FAILED_CONCLUSIONS]
        if not jobs:
            failing.append(f"{workflow}: the run ended {run.conclusion} without a failed job\n{run.html_url}")
        for job in jobs:
            failing.append(client.scrub(_job_excerpt(client, repo, workflow, run, job, read_log=logs_left > 0)))
            logs_left -= 1
    return CIStatus("failure", summaries, failing)


def _latest(runs: list[WorkflowRun]) -> list[WorkflowRun]:
    """The newest run per workflow and event, newest first."""
    kept: dict[tuple[int, str], WorkflowRun] = {}
    for run in sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True):
        kept.setdefault((run.workflow_id, run.event), run)
    return list(kept.values())


def _job_excerpt(client: GitHubClient, repo: str, workflow: str, run: WorkflowRun, job: WorkflowJob, *,
                 read_log: bool) -> str:
    step = _failed_step(job)
    at = f" at step '{clip(' '.join(step.name.split()), 160)}'" if step is not None and step.name else ""
    name = f"{clip(workflow, 200)} / {clip(job.name or 'job', 200)}"
    header = f"{name}: {job.conclusion}{at}\n{job.html_url or run.html_url}"
    if not read_log:
        return f"{header}\n(log not read: more than {MAX_LOGS} failed jobs)"
    try:
        data, _ = client.download(f"{client.api_url}/repos/{repo}/actions/jobs/{job.id}/logs",
                                      f"downloading the log of job {job.id} ({job.name}) in {repo}",
                                      max_bytes=MAX_LOG_BYTES)
    except UpstreamError as err:
        if err.retryable:
            raise
        return clip(f"{header}\n(log unavailable: {err.message})", MAX_EXCERPT)
    room = MAX_EXCERPT - len(header) - 1
    excerpt = excerpt_job_log(data.decode("utf-8", errors="replace"), step.name if step else None, room, len)
    return clip(f"{header}\n{excerpt.text}", MAX_EXCERPT)
