"""GitHub context sources: failed CI jobs' logs, open review threads and failed tests.

    GitHubClient            one PyGithub client (token or App installation), retries off
      GitHubActionsSource   "github_actions": per failed job of the latest failed runs, the failing
                            step's log excerpt (build_log); every whole log kept in blobs
      GitHubReviewsSource   "github_reviews": the PR's review threads, unresolved only when GraphQL
                            says which are resolved, and reviews' summary bodies (review_comment)
      GitHubTestResultsSource "github_tests": failed tests from JUnit XML in the latest run's
                            artifacts, else failure annotations of the head's check runs (test_result)

Which commit: a card whose url is a pull request (…/owner/repo/pull/N), or whose id is a GitHub
board id ("owner:repo#N", "owner/repo#N") that names a pull request, is looked at through the
PR's head commit; otherwise the card's branch. A card with neither, or without a repository,
gets an empty result with a note: that is a fact about the card, not a failure of GitHub.

Retries belong to Temporal: PyGithub gets `retry=None` and httpx has none of its own. Failures
become SourceUnavailable: 401/403/404/410 and other 4xx are not retryable; rate limits (403/429
with x-ratelimit-* or retry-after) retry after the reset, capped at 15 minutes; 5xx, timeouts
and connection errors retry with the policy's backoff. Reasons never carry a credential.
"""

from __future__ import annotations

import abc
import io
import itertools
import math
import re
import time
import urllib.parse
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import github
import httpx
import requests
from github.CheckRun import CheckRun
from github.GithubException import GithubException
from github.PaginatedList import PaginatedList
from github.PullRequest import PullRequest
from github.PullRequestComment import PullRequestComment
from github.Repository import Repository
from github.WorkflowJob import WorkflowJob
from github.WorkflowRun import WorkflowRun
from github.WorkflowStep import WorkflowStep

from cardloop.integrations.sources.base import SourceRequest, SourceResult, SourceUnavailable
from cardloop.prompts.card import Card, ContextItem, ContextKind
from cardloop.prompts.logs import excerpt_log, find_error_lines

Counter = Callable[[str], int]

DEFAULT_API_URL = "https://api.github.com"
MAX_RETRY_AFTER = 900.0          # a rate limit resetting in an hour is waited for in 15-minute steps
SECONDARY_RATE_LIMIT_WAIT = 60.0  # GitHub: "wait at least one minute" when it names no time
USER_AGENT = "cardloop-context"
FAILED_CONCLUSIONS = frozenset({"failure", "timed_out", "startup_failure"})
_MAX_TITLE = 500
_MAX_SOURCE = 500


class _Revealable(Protocol):
    def reveal(self) -> str: ...


SecretLike = str | _Revealable


def _reveal(value: SecretLike | None) -> str | None:
    # cardloop.secrets.Secret (or any holder with reveal()) keeps the value out of reprs until here.
    if value is None:
        return None
    text = value if isinstance(value, str) else value.reveal()
    return text or None


# --- errors --------------------------------------------------------------------------------


def _rate_limit_wait(status: int, headers: dict[str, str], message: str) -> float | None:
    """Seconds to wait when this answer is a rate limit, else None."""
    if status not in (403, 429):
        return None
    retry_after = headers.get("retry-after")
    if retry_after:
        try:
            return min(MAX_RETRY_AFTER, max(1.0, float(retry_after)))
        except ValueError:
            pass  # an HTTP-date: GitHub sends seconds, so fall through to the reset header
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            reset = float(headers["x-ratelimit-reset"])
        except ValueError:
            return SECONDARY_RATE_LIMIT_WAIT
        return min(MAX_RETRY_AFTER, max(1.0, math.ceil(reset - time.time())))
    if "rate limit" in message.lower() or status == 429:
        return SECONDARY_RATE_LIMIT_WAIT
    return None


def classify_status(status: int, headers: dict[str, str], message: str, doing: str) -> SourceUnavailable:
    """A GitHub error answer as SourceUnavailable: whether retrying can help, and the reason."""
    headers = {k.lower(): str(v) for k, v in headers.items()}
    detail = f"HTTP {status}" + (f": {message}" if message else "")
    wait = _rate_limit_wait(status, headers, message)
    if wait is not None:
        return SourceUnavailable(f"GitHub rate limit reached while {doing} ({detail}); retrying in {wait:.0f} s",
                                 retryable=True, retry_after=wait)
    if status == 401:
        return SourceUnavailable(f"GitHub rejected the credentials while {doing} ({detail}): check the token, or "
                                 "the App id, private key and installation id", retryable=False)
    if status == 403:
        return SourceUnavailable(f"GitHub refused access while {doing} ({detail}): the token or App installation "
                                 "lacks a permission (actions, checks, pull requests: read)", retryable=False)
    if status == 404:
        return SourceUnavailable(f"not found while {doing} ({detail}): it does not exist or these credentials "
                                 "cannot see it", retryable=False)
    if status == 410:
        return SourceUnavailable(f"gone while {doing} ({detail}): expired or deleted", retryable=False)
    if status in (408, 409) or status >= 500:
        return SourceUnavailable(f"GitHub failed while {doing} ({detail})", retryable=True)
    return SourceUnavailable(f"GitHub refused the request while {doing} ({detail})", retryable=False)


def _message(data: Any) -> str:
    if isinstance(data, dict):
        msg = data.get("message")
        if isinstance(msg, str):
            return msg[:300]
        errors = data.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("message", ""))[:300]
    return ""


# --- the client ----------------------------------------------------------------------------


class GitHubClient:
    """PyGithub for the REST and GraphQL calls, httpx for the two downloads PyGithub lacks
    (a job's log and an artifact's zip answer 302 to a signed URL on another host).

    `api_url`: https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise Server.
    `graphql_url`: defaults to the one PyGithub derives from api_url (…/graphql, …/api/graphql).
    Auth: `token`, or `app_id` + `app_private_key` + `installation_id` (an installation token is
    fetched and refreshed by PyGithub). `request_interval` is PyGithub's pause between requests
    (GitHub asks integrations to call serially and gently); tests pass None.
    """

    def __init__(
        self,
        api_url: str = DEFAULT_API_URL,
        *,
        token: SecretLike | None = None,
        app_id: int | str | None = None,
        app_private_key: SecretLike | None = None,
        installation_id: int | None = None,
        graphql_url: str | None = None,
        timeout: float = 30.0,
        request_interval: float | None = 0.25,
        user_agent: str = USER_AGENT,
        verify: bool | str = True,
        per_page: int = 100,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        token_value = _reveal(token)
        key = _reveal(app_private_key)
        app_parts = {"app id": app_id, "private key": key, "installation id": installation_id}
        if any(app_parts.values()) and not all(app_parts.values()) and not token_value:
            missing = ", ".join(k for k, v in app_parts.items() if not v)
            raise ValueError(f"GitHub App auth needs an app id, a private key and an installation id; "
                             f"missing: {missing}")
        auth: github.Auth.Auth
        # A complete App configuration wins over a token: installation tokens are short-lived.
        if app_id and key and installation_id:
            # Env vars often carry a PEM with literal "\n": restore the line breaks PEM needs.
            if "\\n" in key and "\n" not in key.strip():
                key = key.replace("\\n", "\n")
            app_auth = github.Auth.AppAuth(app_id, key)
            try:
                app_auth.create_jwt()  # a bad key is a configuration error: say so at start-up
            except Exception as exc:  # cryptography / pyjwt raise several types; never echo the key
                raise ValueError(f"GitHub App {app_id}: the private key cannot sign a JWT "
                                 f"({type(exc).__name__})") from None
            auth = app_auth.get_installation_auth(int(installation_id))
            self.auth_kind = f"GitHub App {app_id} installation {installation_id}"
        elif token_value:
            auth = github.Auth.Token(token_value)
            self.auth_kind = "token"
        else:
            raise ValueError("GitHub sources need a token or a GitHub App (app id, private key, installation id)")
        self._secrets = tuple(s for s in (token_value, key) if s)
        self.gh = github.Github(
            base_url=self.api_url,
            auth=auth,
            timeout=max(1, math.ceil(timeout)),  # PyGithub insists on an int
            retry=None,                          # Temporal retries the activity
            user_agent=user_agent,
            per_page=per_page,
            verify=verify,
            seconds_between_requests=request_interval,
            seconds_between_writes=request_interval,
        )
        self.graphql_url = graphql_url or self.gh.requester.graphql_url
        if urllib.parse.urlsplit(self.graphql_url).netloc != urllib.parse.urlsplit(self.api_url).netloc:
            # PyGithub sends credentials only to its own host: another one is a configuration slip.
            raise ValueError(f"graphql_url {self.graphql_url!r} is not on the API's host ({self.api_url})")
        self.timeout = timeout
        # follow_redirects: the 302 targets are signed storage URLs; httpx drops Authorization
        # when a redirect leaves the API's origin, so the token never reaches the storage host.
        self.http = httpx.Client(timeout=timeout, follow_redirects=True, verify=verify,
                                 headers={"User-Agent": user_agent, "Accept": "application/vnd.github+json"})

    def close(self) -> None:
        self.gh.close()
        self.http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- calls ------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        # Defence in depth: reasons are built from GitHub's messages, which never echo a
        # credential, but a reason must not carry one even if some proxy did.
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def calling(self, doing: str) -> Iterator[None]:
        """Turn whatever a GitHub call raises into SourceUnavailable saying what was being done."""
        try:
            yield
        except SourceUnavailable:
            raise
        except GithubException as exc:
            err = classify_status(exc.status, dict(exc.headers or {}), _message(exc.data), doing)
            raise SourceUnavailable(self.scrub(err.reason), retryable=err.retryable,
                                    retry_after=err.retry_after) from None
        except (requests.Timeout, httpx.TimeoutException):
            raise SourceUnavailable(f"GitHub ({self._host()}) timed out while {doing} "
                                    f"(timeout {self.timeout:g} s)", retryable=True) from None
        except (requests.ConnectionError, httpx.TransportError) as exc:
            raise SourceUnavailable(f"cannot reach GitHub ({self._host()}) while {doing}: {type(exc).__name__}",
                                    retryable=True) from None
        except requests.RequestException as exc:
            raise SourceUnavailable(f"GitHub request failed while {doing}: {type(exc).__name__}",
                                    retryable=True) from None

    def _host(self) -> str:
        return urllib.parse.urlsplit(self.api_url).netloc

    def _auth_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        auth = self.gh.requester.auth
        if auth is not None:
            auth.authentication(headers)  # an App installation token is fetched/refreshed here
        return headers

    def download(self, url: str, doing: str, *, max_bytes: int, keep: str = "tail") -> tuple[bytes, int]:
        """GET `url` with the client's auth, following the 302 to storage.

        Returns (body, total bytes seen). Over `max_bytes`, keep="tail" keeps the last bytes
        (a log's end says how it failed); keep="none" stops and returns b"" (a cut zip is useless).
        """
        with self.calling(doing), self.http.stream("GET", url, headers=self._auth_headers()) as resp:
            if resp.status_code >= 400:
                resp.read()
                try:
                    message = _message(resp.json())
                except ValueError:
                    message = ""
                err = classify_status(resp.status_code, dict(resp.headers), message, doing)
                raise SourceUnavailable(self.scrub(err.reason), retryable=err.retryable, retry_after=err.retry_after)
            buf = bytearray()
            total = 0
            for chunk in resp.iter_bytes():
                total += len(chunk)
                if total > max_bytes and keep == "none":
                    return b"", total
                buf += chunk
                if len(buf) > max_bytes:
                    del buf[: len(buf) - max_bytes]
            return bytes(buf), total

    def graphql(self, query: str, variables: dict[str, Any], doing: str) -> dict[str, Any]:
        """POST a GraphQL query with the client's auth. GraphQL answers its errors with 200 and an
        `errors` list: RATE_LIMITED is retryable after the reset, the others (NOT_FOUND,
        FORBIDDEN, a bad query) are not."""
        with self.calling(doing):
            headers, data = self.gh.requester.requestJsonAndCheck(
                "POST", self.graphql_url, input={"query": query, "variables": variables})
        if not isinstance(data, dict):
            raise SourceUnavailable(f"GitHub GraphQL answered no JSON object while {doing}", retryable=True)
        errors = data.get("errors")
        if errors:
            first = errors[0] if isinstance(errors, list) and isinstance(errors[0], dict) else {}
            kind = str(first.get("type", "")) or "error"
            reason = self.scrub(f"GitHub GraphQL refused while {doing} ({kind}: {str(first.get('message', ''))[:300]})")
            if kind == "RATE_LIMITED":
                wait = _rate_limit_wait(403, {k.lower(): str(v) for k, v in headers.items()}, "rate limit")
                raise SourceUnavailable(reason, retryable=True, retry_after=wait)
            raise SourceUnavailable(reason, retryable=False)
        return data.get("data") or {}

    # -- which repository, branch and pull request ------------------------------------------

    def resolve(self, card: Card, *, find_pr_by_branch: bool = False) -> _Target | str:
        """The card's repository, branch and pull request; a string says why there is nothing to look at."""
        ref = parse_pr_ref(card)
        repo_name = ref.repo if ref else card.repo
        if not repo_name:
            return "the card names no repository (card.repo, or a pull request url/id)"
        if ref is None and not card.branch:
            return f"the card names neither a branch nor a pull request of {repo_name}"
        with self.calling(f"reading repository {repo_name}"):
            repo = self.gh.get_repo(repo_name)
        notes: list[str] = []
        pr: PullRequest | None = None
        if ref is not None:
            try:
                with self.calling(f"reading pull request {repo_name}#{ref.number}"):
                    pr = repo.get_pull(ref.number)
                    _ = pr.head.sha
            except SourceUnavailable as err:
                # A GitHub board id names an issue as often as a PR: /pulls/N is 404 for an issue.
                if ref.definite or err.retryable or "not found" not in err.reason:
                    raise
                pr = None
                notes.append(f"{repo_name}#{ref.number} is an issue, not a pull request")
        if pr is None and card.branch and find_pr_by_branch:
            owner = repo_name.split("/", 1)[0]
            with self.calling(f"looking for an open pull request from branch {card.branch} of {repo_name}"):
                for candidate in repo.get_pulls(state="open", head=f"{owner}:{card.branch}"):
                    pr = candidate
                    break
        if pr is None and not card.branch:
            return "; ".join([*notes, f"the card names no branch of {repo_name} to look at"])
        return _Target(repo=repo, name=repo_name, branch=card.branch, pr=pr, notes=tuple(notes))


@dataclass(frozen=True)
class PullRef:
    repo: str
    number: int
    definite: bool  # from a /pull/N url; an "owner:repo#N" id may name an issue


_PR_URL = re.compile(r"/(?:repos/)?([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/pulls?/(\d+)(?:[/?#]|\Z)")
_PR_ID = re.compile(r"^([A-Za-z0-9_.-]+)[:/]([A-Za-z0-9_.-]+)#(\d+)\Z")


def parse_pr_ref(card: Card) -> PullRef | None:
    """The pull request a card names by url (definite) or by a GitHub board id (maybe an issue)."""
    if card.url:
        m = _PR_URL.search(urllib.parse.urlsplit(card.url).path + "/")
        if m:
            return PullRef(f"{m.group(1)}/{m.group(2)}", int(m.group(3)), definite=True)
    m = _PR_ID.match(card.id)
    if m:
        return PullRef(f"{m.group(1)}/{m.group(2)}", int(m.group(3)), definite=False)
    return None


@dataclass(frozen=True)
class _Target:
    repo: Repository
    name: str
    branch: str | None
    pr: PullRequest | None
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.pr is not None:
            return f"{self.name}#{self.pr.number} (head {self.pr.head.sha[:12]})"
        return f"{self.name} branch {self.branch}"


def _default_counter() -> Counter:
    # Imported on use: loading the vocabulary is needless when the caller injects its counter.
    from cardloop.prompts.tokens import TokenCounter

    return TokenCounter("cl100k_base").count


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _GitHubSource(abc.ABC):
    """The shared part of the three GitHub sources; each subclass implements `_gather`."""

    name = "github"

    def __init__(self, client: GitHubClient, *, count: Counter | None = None) -> None:
        self.client = client
        self.count = count or _default_counter()

    def gather(self, request: SourceRequest) -> SourceResult:
        # Objects PyGithub completes lazily may call GitHub anywhere below: map what escapes.
        with self.client.calling(f"gathering {self.name} for card {request.card.id}"):
            return self._gather(request)

    @abc.abstractmethod
    def _gather(self, request: SourceRequest) -> SourceResult:
        """What the source finds for the card (GitHub calls inside `client.calling`)."""


# --- GitHub Actions: failed jobs and their logs --------------------------------------------

_TIMESTAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STEP_START = "##[group]Run "
_SETUP = "Set up job"  # what comes before the first step: runner, image, permissions


def clean_log_lines(text: str) -> list[str]:
    """Lines as the Actions UI shows them: without the per-line timestamp and colour codes,
    which cost tokens and say nothing the excerpt needs (the whole log keeps them)."""
    text = text.removeprefix("\ufeff")
    lines = (text[:-1] if text.endswith("\n") else text).split("\n")
    return [_ANSI.sub("", _TIMESTAMP.sub("", line)).rstrip("\r") for line in lines]


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
    described = f"step section '{_clip(header, 80)}' (log lines {start + 1}-{end}; {ex.describe()})"
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


class GitHubActionsSource(_GitHubSource):
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
        for run in runs:
            with self.client.calling(f"listing jobs of workflow run {run.id} in {target.name}"):
                jobs = [j for j in run.jobs() if j.conclusion in FAILED_CONCLUSIONS]
            if len(jobs) > self.max_jobs_per_run:
                notes.append(f"run {run.id}: {len(jobs)} failed jobs, the first {self.max_jobs_per_run} kept")
                jobs = jobs[: self.max_jobs_per_run]
            for job in jobs:
                item, log, note = self._job_item(target, run, job)
                items.append(item)
                if log is not None:
                    blobs[f"github_actions/{job.id}.log"] = log
                if note:
                    notes.append(note)
        notes.insert(0, f"{len(runs)} failed run(s), {len(items)} failed job(s) for {target.describe()}")
        return SourceResult(self.name, items=tuple(items), blobs=blobs, notes=tuple(notes))

    def _failed_runs(self, target: _Target) -> list[WorkflowRun]:
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

    def _job_item(self, target: _Target, run: WorkflowRun, job: WorkflowJob
                  ) -> tuple[ContextItem, str | None, str | None]:
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
        try:
            data, total = self.client.download(
                f"{target.repo.url}/actions/jobs/{job.id}/logs",
                f"downloading the log of job {job.id} ({job.name}) in {target.name}",
                max_bytes=self.max_log_bytes)
            log = data.decode("utf-8", errors="replace")
            if total > len(data):
                note = f"job {job.id}: log of {total:,} bytes, its last {len(data):,} kept"
        except SourceUnavailable as err:
            if err.retryable:
                raise
            note = f"job {job.id}: log unavailable: {err.reason}"
            header.append(f"Log: unavailable ({err.reason})")
        body = "\n".join(header)
        if log is not None:
            body = self._with_excerpt(header, log, step_name, label)
        title = f"CI: {workflow} / {job.name} failed at step '{step_name or '?'}' ({job.conclusion})"
        item = ContextItem(kind=ContextKind.BUILD_LOG, source=_clip(job.html_url or run.html_url, _MAX_SOURCE),
                           title=_clip(title, _MAX_TITLE), content=body, created_at=job.completed_at)
        return item, log, note

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


# --- pull request review threads -----------------------------------------------------------

_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes { isResolved isOutdated comments(first: 100) { nodes { databaseId } } }
      }
    }
  }
}
"""


@dataclass
class _Thread:
    root: PullRequestComment
    comments: list[PullRequestComment] = field(default_factory=list)
    resolved: bool | None = None
    outdated: bool = False


def _present(obj: Any, key: str) -> Any:
    """An attribute GitHub may leave out, read without completing the object: PyGithub
    answers a missing attribute by GETting the object again (one request per comment for
    `in_reply_to_id`, which GitHub omits on every thread's first comment)."""
    raw = getattr(obj, "_rawData", None)
    return raw.get(key) if isinstance(raw, dict) else getattr(obj, key, None)


def _author(obj: Any) -> str:
    user = getattr(obj, "user", None)
    return (getattr(user, "login", None) or "someone") if user is not None else "someone"


class GitHubReviewsSource(_GitHubSource):
    """The card's pull request's review threads and review summaries, as review_comment items.

    Threads come from the REST review comments (grouped by in_reply_to_id); GraphQL's
    reviewThreads.isResolved says which are resolved, and those are left out. Without GraphQL
    (refused, not found) every thread is kept and a note says so. `hunk_lines`: lines of the
    diff hunk above the commented line shown with each thread.
    """

    name = "github_reviews"

    def __init__(self, client: GitHubClient, *, count: Counter | None = None, hunk_lines: int = 6,
                 max_threads: int = 50) -> None:
        super().__init__(client, count=count)
        self.hunk_lines = hunk_lines
        self.max_threads = max_threads

    def _gather(self, request: SourceRequest) -> SourceResult:
        target = self.client.resolve(request.card, find_pr_by_branch=True)
        if isinstance(target, str):
            return SourceResult(self.name, notes=(target,))
        notes = list(target.notes)
        pr = target.pr
        if pr is None:
            notes.append(f"no open pull request from branch {target.branch} of {target.name}")
            return SourceResult(self.name, notes=tuple(notes))
        where = f"{target.name}#{pr.number}"
        with self.client.calling(f"listing review comments of {where}"):
            comments = list(pr.get_review_comments())
        threads = self._threads(comments)
        state = self._resolution(target, pr.number, threads)
        if state:
            notes.append(state)
        open_threads = [t for t in threads if t.resolved is not True]
        resolved = len(threads) - len(open_threads)
        items = [self._thread_item(t) for t in open_threads[: self.max_threads]]
        with self.client.calling(f"listing reviews of {where}"):
            reviews = [r for r in pr.get_reviews() if r.state in ("CHANGES_REQUESTED", "COMMENTED")
                       and (r.body or "").strip()]
        for review in reviews:
            author = _author(review)
            verdict = "changes requested" if review.state == "CHANGES_REQUESTED" else "commented"
            items.append(ContextItem(
                kind=ContextKind.REVIEW_COMMENT, source=_clip(review.html_url or pr.html_url, _MAX_SOURCE),
                title=_clip(f"{author} reviewed {where}: {verdict}", _MAX_TITLE),
                content=f"Review of {where} by {author} ({review.state}):\n{author}: {review.body.strip()}",
                created_at=review.submitted_at))
        notes.insert(0, f"{where}: {len(open_threads)} open review thread(s)"
                        + (f", {resolved} resolved left out" if resolved else "")
                        + f", {len(reviews)} review summar{'y' if len(reviews) == 1 else 'ies'}")
        if len(open_threads) > self.max_threads:
            notes.append(f"{len(open_threads) - self.max_threads} more open threads left out")
        return SourceResult(self.name, items=tuple(items), notes=tuple(notes))

    @staticmethod
    def _threads(comments: list[PullRequestComment]) -> list[_Thread]:
        by_id = {c.id: c for c in comments}

        def root_of(c: PullRequestComment) -> PullRequestComment:
            seen = {c.id}
            while (parent := _present(c, "in_reply_to_id")) in by_id and parent not in seen:
                c = by_id[parent]
                seen.add(c.id)
            return c

        threads: dict[int, _Thread] = {}
        for c in sorted(comments, key=lambda c: (c.created_at, c.id)):
            root = root_of(c)
            threads.setdefault(root.id, _Thread(root)).comments.append(c)
        return list(threads.values())

    def _resolution(self, target: _Target, number: int, threads: list[_Thread]) -> str | None:
        """Mark threads resolved/outdated from GraphQL; a note when that is not possible."""
        if not threads:
            return None
        owner, name = target.name.split("/", 1)
        state: dict[int, tuple[bool, bool]] = {}
        after: str | None = None
        try:
            for _ in range(20):  # 2,000 threads: far beyond any reviewable PR
                data = self.client.graphql(_THREADS_QUERY, {"owner": owner, "name": name, "number": number,
                                                            "after": after},
                                           f"reading review thread state of {target.name}#{number}")
                pr = ((data.get("repository") or {}).get("pullRequest")) or {}
                page = pr.get("reviewThreads") or {}
                for node in page.get("nodes") or []:
                    flags = (bool(node.get("isResolved")), bool(node.get("isOutdated")))
                    for c in ((node.get("comments") or {}).get("nodes") or []):
                        if isinstance(c.get("databaseId"), int):
                            state[c["databaseId"]] = flags
                info = page.get("pageInfo") or {}
                if not info.get("hasNextPage"):
                    break
                after = info.get("endCursor")
        except SourceUnavailable as err:
            # Resolution only filters: without it every thread is kept, which beats waiting out
            # a GraphQL rate limit. A failure retrying soon can fix (5xx, timeout) retries.
            if err.retryable and err.retry_after is None:
                raise
            return f"review thread resolution unknown, all threads kept: {err.reason}"
        for t in threads:
            flags = next((state[c.id] for c in t.comments if c.id in state), None)
            if flags is not None:
                t.resolved, t.outdated = flags
        return None

    def _thread_item(self, t: _Thread) -> ContextItem:
        root = t.root
        line = root.line or root.original_line
        start = root.start_line or root.original_start_line
        where = root.path + (f":{start}-{line}" if start and line and start != line else f":{line}" if line else "")
        status = "unresolved" if t.resolved is False else "resolution unknown"
        if t.outdated:
            status += ", outdated: the code has changed since"
        parts = [f"Review thread on {where} ({status})"]
        hunk = (root.diff_hunk or "").rstrip("\n").split("\n")
        if hunk and hunk[0]:
            parts += ["```diff", *hunk[-self.hunk_lines:], "```"]
        parts += [f"{_author(c)}: {(c.body or '').strip()}" for c in t.comments]
        return ContextItem(kind=ContextKind.REVIEW_COMMENT, source=_clip(root.html_url, _MAX_SOURCE),
                           title=_clip(f"{_author(root)} on {where}", _MAX_TITLE), content="\n".join(parts),
                           created_at=t.comments[-1].created_at)


# --- test results: JUnit XML from artifacts, else check-run annotations --------------------


@dataclass(frozen=True)
class FailedTest:
    classname: str
    name: str
    kind: str  # "failure" or "error"
    message: str
    text: str
    file: str = ""
    line: str = ""

    @property
    def id(self) -> str:
        return f"{self.classname}.{self.name}" if self.classname else self.name


@dataclass
class JUnitReport:
    total: int = 0
    failed: list[FailedTest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def parse_junit(xml: bytes, report: JUnitReport) -> bool:
    """Add one JUnit XML document's test cases to `report`; False when it is not JUnit.

    ElementTree does not fetch external entities and expat refuses entity-expansion bombs,
    which is what parsing an artifact (untrusted) needs."""
    root = ET.fromstring(xml)
    if root.tag not in ("testsuites", "testsuite"):
        return False
    for case in root.iter("testcase"):
        report.total += 1
        bad = next((child for child in case if child.tag in ("failure", "error")), None)
        if bad is None:
            continue
        report.failed.append(FailedTest(
            classname=case.get("classname", ""), name=case.get("name", "?"), kind=bad.tag,
            message=(bad.get("message") or "").strip(), text=(bad.text or "").strip("\n"),
            file=case.get("file", ""), line=case.get("line", "")))
    return True


def _failure_block(n: int, test: FailedTest, first_lines: int) -> str:
    out = [f"{n}. {test.id} [{test.kind}]"]
    if test.file:
        out.append(f"   at {test.file}" + (f":{test.line}" if test.line else ""))
    if test.message:
        out.append(f"   message: {_clip(' '.join(test.message.split()), 500)}")
    lines = test.text.split("\n") if test.text else []
    shown = lines[:first_lines]
    out += [f"   | {_clip(line, 300)}" for line in shown]
    # pytest puts the statement first and the "E ..." lines further down: keep those too.
    later = [k for k in find_error_lines(lines) if k >= first_lines][-6:]
    if later:
        out.append(f"   | [... {later[0] - first_lines} lines cut ...]" if later[0] > first_lines else "   |")
        out += [f"   | {_clip(lines[k], 300)}" for k in later]
    if len(lines) > (later[-1] + 1 if later else first_lines):
        out.append(f"   | [... {len(lines) - (later[-1] + 1 if later else first_lines)} more lines ...]")
    return "\n".join(out)


class GitHubTestResultsSource(_GitHubSource):
    """Failed tests of the card's PR head or branch, as test_result items.

    The newest completed run fixes the commit; JUnit XML files (*.xml whose root is testsuites
    or testsuite) in the artifacts of that commit's completed runs (at most `max_runs`) give one
    item per artifact with failures. Without JUnit, failure annotations of the commit's check
    runs give one item per check run. `excerpt_tokens` bounds each item; `first_lines` is how
    much of each failure text is shown; the full report of each artifact goes to blobs.
    """

    name = "github_tests"

    def __init__(self, client: GitHubClient, *, max_runs: int = 3, excerpt_tokens: int = 4000,
                 count: Counter | None = None, first_lines: int = 12,
                 max_artifact_bytes: int = 25 * 1024 * 1024, max_artifacts: int = 10) -> None:
        super().__init__(client, count=count)
        self.max_runs = max_runs
        self.excerpt_tokens = excerpt_tokens
        self.first_lines = first_lines
        self.max_artifact_bytes = max_artifact_bytes
        self.max_artifacts = max_artifacts

    def _gather(self, request: SourceRequest) -> SourceResult:
        target = self.client.resolve(request.card)
        if isinstance(target, str):
            return SourceResult(self.name, notes=(target,))
        notes = list(target.notes)
        runs, sha = self._latest_runs(target)
        if sha is None:
            notes.append(f"no completed workflow runs for {target.describe()}")
            return SourceResult(self.name, notes=tuple(notes))
        items: list[ContextItem] = []
        blobs: dict[str, str] = {}
        found_junit = False
        downloaded = 0
        for run in runs:
            with self.client.calling(f"listing artifacts of workflow run {run.id} in {target.name}"):
                artifacts = list(run.get_artifacts())
            for artifact in artifacts:
                if artifact.expired:
                    notes.append(f"artifact {artifact.name} has expired")
                    continue
                if artifact.size_in_bytes > self.max_artifact_bytes:
                    notes.append(f"artifact {artifact.name} ({artifact.size_in_bytes:,} bytes) is too large to read")
                    continue
                if downloaded >= self.max_artifacts:
                    notes.append(f"more than {self.max_artifacts} artifacts: the rest not read")
                    break
                downloaded += 1
                report = self._read_artifact(artifact.archive_download_url, artifact.name, target, notes)
                if report is None:
                    continue
                found_junit = True
                notes.append(f"artifact {artifact.name}: {len(report.failed)} failed of {report.total} "
                             f"in {len(report.files)} JUnit file(s)")
                if report.failed:
                    where = f"artifact {artifact.name} of run {run.html_url} (commit {sha[:12]})"
                    # The artifact's page in the UI; the API's archive URL would only download it.
                    source = _clip(f"{run.html_url}/artifacts/{artifact.id}", _MAX_SOURCE)
                    item, full = self._report_item(report, where, source, artifact.created_at)
                    items.append(item)
                    blobs[f"github_tests/{artifact.id}.txt"] = full
        if not found_junit:
            items += self._annotation_items(target, sha, notes)
        return SourceResult(self.name, items=tuple(items), blobs=blobs, notes=tuple(notes))

    def _latest_runs(self, target: _Target) -> tuple[list[WorkflowRun], str | None]:
        with self.client.calling(f"listing workflow runs of {target.describe()}"):
            if target.pr is not None:
                listing = target.repo.get_workflow_runs(head_sha=target.pr.head.sha)
            else:
                listing = target.repo.get_workflow_runs(branch=target.branch)
            sha: str | None = None
            runs: list[WorkflowRun] = []
            for run in itertools.islice(listing, 100):
                if len(runs) >= self.max_runs:
                    break
                if run.status != "completed":
                    continue  # still running: no artifacts yet
                if sha is None:
                    sha = run.head_sha
                if run.head_sha == sha:
                    runs.append(run)
        return runs, sha

    def _read_artifact(self, url: str, name: str, target: _Target, notes: list[str]) -> JUnitReport | None:
        data, total = self.client.download(url, f"downloading artifact {name} of {target.name}",
                                           max_bytes=self.max_artifact_bytes, keep="none")
        if not data:
            notes.append(f"artifact {name} ({total:,} bytes) is too large to read")
            return None
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            notes.append(f"artifact {name} is not a zip archive")
            return None
        report = JUnitReport()
        with archive:
            for info in archive.infolist():
                if info.is_dir() or not info.filename.lower().endswith(".xml"):
                    continue
                if info.file_size > 4 * self.max_artifact_bytes:  # a zip bomb is not a test report
                    notes.append(f"artifact {name}: {info.filename} is too large to parse")
                    continue
                try:
                    if parse_junit(archive.read(info), report):
                        report.files.append(info.filename)
                except (ET.ParseError, zipfile.BadZipFile, ValueError) as exc:
                    notes.append(f"artifact {name}: {info.filename} is not readable XML ({type(exc).__name__})")
        return report if report.files else None

    def _report_item(self, report: JUnitReport, where: str, source: str, created: datetime | None
                     ) -> tuple[ContextItem, str]:
        n, m = len(report.failed), report.total
        head = f"Failed tests: {n} of {m} in {where}\nJUnit files: {', '.join(report.files)}\n"
        blocks = [_failure_block(i + 1, t, self.first_lines) for i, t in enumerate(report.failed)]
        full = head + "\n" + "\n\n".join(_failure_block(i + 1, t, 10_000) for i, t in enumerate(report.failed))
        content = self._fit(head, blocks)
        return ContextItem(kind=ContextKind.TEST_RESULT, source=source, title=f"Tests: {n} failed of {m}",
                           content=content, created_at=created), full

    def _fit(self, head: str, blocks: list[str]) -> str:
        """As many whole failure blocks as fit the budget, then how many more there are."""
        text = head
        for k, block in enumerate(blocks):
            more = f"\n[... {len(blocks) - k} more failed tests: see the stored report ...]"
            candidate = f"{text}\n{block}\n"
            if self.count(candidate + more) > self.excerpt_tokens:
                if k == 0:  # not even one block: its first lines are still the most useful thing
                    return excerpt_log(candidate, self.excerpt_tokens - self.count(more) - 4, self.count).text + more
                return text + more
            text = candidate
        return text

    def _annotation_items(self, target: _Target, sha: str, notes: list[str]) -> list[ContextItem]:
        items: list[ContextItem] = []
        doing = f"listing check runs of commit {sha[:12]} in {target.name}"
        with self.client.calling(doing):
            # Repository.get_commit would fetch the whole commit first; the list is all we need.
            check_runs: PaginatedList[CheckRun] = PaginatedList(
                CheckRun, self.client.gh.requester, f"{target.repo.url}/commits/{sha}/check-runs",
                {"filter": "latest"}, list_item="check_runs")
            failed = [c for c in check_runs if c.conclusion in FAILED_CONCLUSIONS
                      and c.output is not None and (c.output.annotations_count or 0) > 0]
        for check in failed:
            with self.client.calling(f"listing annotations of check run {check.name} in {target.name}"):
                annotations = [a for a in check.get_annotations() if a.annotation_level == "failure"
                               and not _PROCESS_EXIT.match(a.message or "")]
            if not annotations:
                continue
            tests = [FailedTest(classname="", name=a.title or f"{a.path}:{a.start_line}", kind="failure",
                                message=a.message or "", text=a.raw_details or "", file=a.path or "",
                                line=str(a.start_line or "")) for a in annotations]
            head = (f"Failed tests: {len(tests)} failure annotation(s) of check run '{check.name}' "
                    f"(commit {sha[:12]}, {check.html_url})\n")
            content = self._fit(head, [_failure_block(i + 1, t, self.first_lines) for i, t in enumerate(tests)])
            items.append(ContextItem(kind=ContextKind.TEST_RESULT, source=_clip(check.html_url, _MAX_SOURCE),
                                     title=f"Tests: {len(tests)} failed (check run '{_clip(check.name, 200)}')",
                                     content=content, created_at=check.completed_at))
        notes.append(f"no JUnit XML in the artifacts of commit {sha[:12]}; "
                     f"{len(items)} check run(s) with failure annotations")
        return items


_PROCESS_EXIT = re.compile(r"^Process completed with exit code \d+\.?\n?\Z")  # what "$" allowed, said outright
