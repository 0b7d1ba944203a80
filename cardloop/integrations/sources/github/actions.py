"""GitHub Actions: per failed job of the latest failed runs, the failing step's log excerpt
(build_log items); every whole log kept in blobs."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from github.WorkflowJob import WorkflowJob
from github.WorkflowRun import WorkflowRun
from github.WorkflowStep import WorkflowStep

from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.integrations.sources.github.client import GitHubClient, Target
from cardloop.integrations.sources.github.common import (
    FAILED_CONCLUSIONS,
    MAX_SOURCE,
    MAX_TITLE,
    GitHubSource,
    clip,
)
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.logs import Counter, excerpt_log, find_error_lines, strip_ansi

_TIMESTAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
_STEP_START = "##[group]Run "
_SETUP = "Set up job"  # what comes before the first step: runner, image, permissions


def clean_log_lines(text: str) -> list[str]:
    """Lines as the Actions UI shows them: without the per-line timestamp and colour codes,
    which cost tokens and say nothing the excerpt needs (the whole log keeps them)."""
    text = text.removeprefix("\ufeff")
    lines = (text[:-1] if text.endswith("\n") else text).split("\n")
    return [strip_ansi(_TIMESTAMP.sub("", line)).rstrip("\r") for line in lines]


def step_sections(lines: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, header) of each step: GitHub opens a step with `##[group]Run <what>`
    (its inputs follow until ##[endgroup], then its output) and the next step ends it."""
    starts = [(i, line[len("##[group]"):].strip()) for i, line in enumerate(lines) if line.startswith(_STEP_START)]
    sections: list[tuple[int, int, str]] = []
    if not starts or starts[0][0] > 0:
        sections.append((0, starts[0][0] if starts else len(lines), _SETUP))
    for k, (start, header) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        sections.append((start, end, header))
    return sections


def failing_section(lines: Sequence[str], step_name: str | None) -> tuple[int, int, str] | None:
    """The log section of the failed step: by its name (an unnamed step is "Run <command>",
    as in the log), else the section holding the first ##[error], else None (use it all)."""
    sections = step_sections(lines)

    def has_error(sec: tuple[int, int, str]) -> bool:
        return any(line.startswith("##[error]") for line in lines[sec[0]:sec[1]])

    if step_name:
        name = " ".join(step_name.split())
        # Exact first; then prefixes, since a long command line may be cut in one place or the other.
        for matches in (lambda h: h == name, lambda h: h.startswith(name) or name.startswith(h)):
            named = [s for s in sections if s[2] != _SETUP and matches(s[2])]
            if named:
                with_error = [s for s in named if has_error(s)]
                return (with_error or named)[-1]
    for sec in sections:
        if has_error(sec):
            return sec
    return None


@dataclass(frozen=True)
class LogExcerpt:
    text: str
    described: str


def excerpt_job_log(text: str, step_name: str | None, max_tokens: int, count: Counter) -> LogExcerpt:
    """What a developer reads first: the failing step's section cut to `max_tokens` by
    excerpt_log (its errors, tracebacks, failed tests with context, head and tail); when that
    leaves room and other sections hold errors too, an excerpt of the rest of the log."""
    lines = clean_log_lines(text)
    section = failing_section(lines, step_name)
    if section is None:
        ex = excerpt_log("\n".join(lines), max_tokens, count)
        return LogExcerpt(ex.text, f"whole log ({ex.describe()})")
    start, end, header = section
    ex = excerpt_log("\n".join(lines[start:end]), max_tokens, count)
    described = f"step section '{clip(header, 80)}' (log lines {start + 1}-{end}; {ex.describe()})"
    out = ex.text
    rest = [*lines[:start], *lines[end:]]
    marker = "[... other steps of this job, with errors: ...]"
    left = max_tokens - count(out) - count(marker) - 4
    if left >= 200 and find_error_lines(rest):
        ex2 = excerpt_log("\n".join(rest), left, count)
        candidate = f"{out}\n{marker}\n{ex2.text}"
        if count(candidate) <= max_tokens:
            out = candidate
            described += f"; other steps: {ex2.describe()}"
    return LogExcerpt(out, described)


def _failed_step(job: WorkflowJob) -> WorkflowStep | None:
    steps = list(job.steps or [])
    for step in steps:
        if step.conclusion in FAILED_CONCLUSIONS:
            return step
    # A timed-out or cancelled job may mark no step failed: the step that did not succeed is it.
    for step in steps:
        if step.conclusion not in (None, "success", "skipped"):
            return step
    return None


class GitHubActionsSource(GitHubSource):
    """Failed jobs of the latest failed workflow runs, each as a build_log item.

    `max_runs`: failed runs looked at, newest first, one per workflow (an older failure of the
    same workflow is stale). `excerpt_tokens`: budget of each item's content. `max_log_bytes`:
    a larger log keeps its last bytes (the end says how it failed).
    """

    name = "github_actions"

    def __init__(self, client: GitHubClient, *, max_runs: int = 3, excerpt_tokens: int = 4000,
                 count: Counter | None = None, max_log_bytes: int = 32 * 1024 * 1024,
                 max_jobs_per_run: int = 10) -> None:
        super().__init__(client, count=count)
        if max_runs < 1 or excerpt_tokens < 200:
            raise ValueError("max_runs must be >= 1 and excerpt_tokens >= 200")
        self.max_runs = max_runs
        self.excerpt_tokens = excerpt_tokens
        self.max_log_bytes = max_log_bytes
        self.max_jobs_per_run = max_jobs_per_run

    def _gather(self, request: SourceRequest) -> SourceResult:
        target = self.client.resolve(request.card)
        if isinstance(target, str):
            return SourceResult(self.name, notes=(target,))
        notes = list(target.notes)
        runs = self._failed_runs(target)
        if not runs:
            notes.append(f"no failed workflow runs for {target.describe()}")
            return SourceResult(self.name, notes=tuple(notes))
        items: list[ContextItem] = []
        blobs: dict[str, str] = {}
        # One run's job listing or one job's log failing costs that part only (base.py: partial).
        missing: list[str] = []
        retry: UpstreamError | None = None
        for run in runs:
            try:
                with self.client.calling(f"listing jobs of workflow run {run.id} in {target.name}"):
                    jobs = [j for j in run.jobs() if j.conclusion in FAILED_CONCLUSIONS]
            except UpstreamError as err:
                missing.append(f"run {run.id} ({run.name or 'workflow'}): failed jobs not listed: {err.message}")
                retry = retry or (err if err.retryable else None)
                continue
            if len(jobs) > self.max_jobs_per_run:
                notes.append(f"run {run.id}: {len(jobs)} failed jobs, the first {self.max_jobs_per_run} kept")
                jobs = jobs[: self.max_jobs_per_run]
            for job in jobs:
                item, log, note, failed = self._job_item(target, run, job)
                items.append(item)
                if log is not None:
                    blobs[f"github_actions/{job.id}.log"] = log
                if note:
                    notes.append(note)
                if failed is not None:
                    missing.append(f"job {job.id} ({job.name}): log not read: {failed.message}")
                    retry = retry or (failed if failed.retryable else None)
        notes.insert(0, f"{len(runs)} failed run(s), {len(items)} failed job(s) for {target.describe()}")
        return SourceResult(self.name, items=tuple(items), blobs=blobs, notes=tuple(notes),
                            missing=tuple(missing), retry=retry)

    def _failed_runs(self, target: Target) -> list[WorkflowRun]:
        doing = f"listing failed workflow runs of {target.describe()}"
        with self.client.calling(doing):
            if target.pr is not None:
                listing = target.repo.get_workflow_runs(head_sha=target.pr.head.sha, status="failure")
            else:
                listing = target.repo.get_workflow_runs(branch=target.branch, status="failure")
            picked: list[WorkflowRun] = []
            seen_workflows: set[int] = set()
            for run in itertools.islice(listing, 100):  # one page: older failures are history
                if len(picked) >= self.max_runs:
                    break
                if run.workflow_id in seen_workflows:
                    continue
                seen_workflows.add(run.workflow_id)
                picked.append(run)
        return picked

    def _job_item(self, target: Target, run: WorkflowRun, job: WorkflowJob
                  ) -> tuple[ContextItem, str | None, str | None, UpstreamError | None]:
        """The job's item (its log's excerpt, or a header saying why there is none), the whole
        log, a note, and the failure that left the log unread."""
        step = _failed_step(job)
        step_name = step.name if step is not None else None
        workflow = run.name or job.workflow_name or "workflow"
        header = [
            f"Workflow: {workflow} (run #{run.run_number}, attempt {run.run_attempt}, event {run.event})",
            f"Job: {job.name}",
            f"Failed step: {step_name} (step {step.number}: {step.conclusion})" if step is not None
            else "Failed step: none reported by GitHub",
            f"Head: {job.head_sha or run.head_sha} (branch {run.head_branch})",
            f"Run: {run.html_url}",
            f"Conclusion: {job.conclusion}",
        ]
        label = f"github_actions/{job.id}.log"
        note = None
        log: str | None = None
        failed: UpstreamError | None = None
        try:
            data, total = self.client.download(
                f"{target.repo.url}/actions/jobs/{job.id}/logs",
                f"downloading the log of job {job.id} ({job.name}) in {target.name}",
                max_bytes=self.max_log_bytes)
            log = data.decode("utf-8", errors="replace")
            if total > len(data):
                note = f"job {job.id}: log of {total:,} bytes, its last {len(data):,} kept"
        except UpstreamError as err:
            failed = err
            header.append(f"Log: unavailable ({err.message})")
        body = "\n".join(header)
        if log is not None:
            body = self._with_excerpt(header, log, step_name, label)
        title = f"CI: {workflow} / {job.name} failed at step '{step_name or '?'}' ({job.conclusion})"
        item = ContextItem(kind=ContextKind.BUILD_LOG, source=clip(job.html_url or run.html_url, MAX_SOURCE),
                           title=clip(title, MAX_TITLE), content=body, created_at=job.completed_at)
        return item, log, note, failed

    def _with_excerpt(self, header: list[str], log: str, step_name: str | None, label: str) -> str:
        # The whole item fits excerpt_tokens: the header's cost comes out of the excerpt's budget.
        budget = self.excerpt_tokens
        for _ in range(3):
            head = "\n".join([*header, "Log: {described}; the whole log is stored as " + label, "", ""])
            room = max(0, budget - self.count(head) - 40)  # 40: the description filled in below
            ex = excerpt_job_log(log, step_name, room, self.count)
            text = head.replace("{described}", ex.described) + ex.text
            over = self.count(text) - self.excerpt_tokens
            if over <= 0:
                return text
            budget -= over + 20
        return text

