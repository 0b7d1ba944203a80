"""A GitHub for the GitHub sources' tests: a loopback server that speaks GitHub's REST and
GraphQL wire formats for exactly the endpoints used, and realistic CI runs, review threads and
test reports to seed it with (fixtures `fake` and `client` in conftest.py).

It also writes what cardloop publishes (github_results.py): pull requests (POST/PATCH, one
open PR per head and base, GitHub's 422 otherwise), issue comments (POST/PATCH, listed in
pages with a Link header; `max_per_page` makes pages small) and pull request reviews (POST,
listed in pages, each review's comments listed; a line comment must name a line of
`diff_lines`, which /pulls/N/files serves as patches, else GitHub's 422).

The API answers under /api/v3 (GitHub Enterprise's shape, so GraphQL is /api/graphql); job
logs and artifact zips answer 302 to a second server on another port, as GitHub's signed
storage URLs do, so following the redirect and dropping the token there are both exercised.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.prompts.card import Card
from cardloop.prompts.stages import Stage

LOGS = Path(__file__).resolve().parents[3] / "prompts" / "fixtures" / "logs"
TOKEN = "ghp_TestToken1234567890abcdefABCDEF1234"
REPO = "acme/payments-api"
BRANCH = "card/PAY-142-webhook-retries"
SHA = "8c41f0d2b7e9a35c6d1e0f4a9b2c7d8e3f5a6b1c"
PR_SHA = "5f3e2d1c0b9a8f7e6d5c4b3a29181706f5e4d3c2"
T0 = datetime(2024, 5, 15, 8, 11, 31, tzinfo=UTC)
PYTEST_STEP = ("Run pytest -q -p no:cacheprovider --junitxml=reports/junit.xml --cov=app "
               "--cov-report=term-missing:skip-covered")


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the fake GitHub ------------------------------------------------------------------------


@dataclass
class Seen:
    server: str   # "api" or "storage"
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any = None


@dataclass
class Failure:
    pattern: re.Pattern[str]
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    times: int | None
    method: str | None = None   # None: any method


@dataclass
class FakeGitHub:
    """GitHub's REST + GraphQL for the endpoints the sources call; state is plain dicts."""

    api_url: str = ""
    storage_url: str = ""
    tokens: set[str] = field(default_factory=lambda: {TOKEN})
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    jobs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    logs: dict[int, bytes] = field(default_factory=dict)
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    zips: dict[int, bytes] = field(default_factory=dict)
    pulls: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    review_comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    reviews: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    # thread state for GraphQL: (isResolved, isOutdated, [comment database ids])
    threads: dict[tuple[str, int], list[tuple[bool, bool, list[int]]]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    annotations: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    app: dict[str, Any] | None = None   # app_id, public_key, installation_id, token
    graphql_error: dict[str, Any] | None = None   # answered with 200, as GitHub's GraphQL does
    seen: list[Seen] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    delays: dict[str, float] = field(default_factory=dict)
    # what cardloop writes: plain issues (PRs are issues too), issue/PR conversation comments
    issues: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    issue_comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    # lines each pull request's diff holds, per path (a review comment elsewhere is GitHub's 422);
    # a pull request not listed accepts any line. /pulls/N/files serves them as patches.
    diff_lines: dict[tuple[str, int], dict[str, set[int]]] = field(default_factory=dict)
    login: str = "cardloop-bot"   # the user the token belongs to
    max_per_page: int = 100       # GitHub's cap; tests lower it to exercise pagination
    next_comment_id: int = 1_900_000_001
    # called with each request before it is answered (under no lock): a test's way to let
    # "someone else" act between two of the client's calls
    hooks: list[Callable[[Seen], None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- test controls --
    def fail(self, path_regex: str, status: int, message: str, headers: dict[str, str] | None = None,
             times: int | None = None, *, method: str | None = None,
             errors: list[Any] | None = None) -> None:   # GitHub's errors: objects, or strings (reviews)
        body: dict[str, Any] = {"message": message, "documentation_url": "https://docs.github.com/rest"}
        if errors is not None:
            body["errors"] = errors
        self.failures.append(Failure(re.compile(path_regex), status, body, headers or {}, times, method))

    def open_pulls(self, full: str) -> list[dict[str, Any]]:
        return [p for (r, _), p in sorted(self.pulls.items()) if r == full and p["state"] == "open"]

    def next_number(self, full: str) -> int:
        """Issues and pull requests share one sequence per repository, as on GitHub."""
        taken = [n for (r, n) in [*self.pulls, *self.issues] if r == full]
        return max(taken, default=0) + 1

    def new_pull(self, full: str, *, head: str, base: str, title: str, body: str | None,
                 number: int | None = None) -> dict[str, Any]:
        """An open pull request as POST /pulls makes it (head: "branch" or "owner:branch")."""
        owner = full.split("/")[0]
        head_owner, _, head_ref = head.rpartition(":")
        head_owner = head_owner or owner
        number = number or self.next_number(full)
        pr = self.pr_json(full, number, head_ref=head_ref)
        now = iso(datetime.now(UTC))
        user = {"login": self.login, "id": 7001, "type": "Bot", "url": f"{self.api_url}/users/{self.login}"}
        pr.update(title=title, body=body, user=user, created_at=now, updated_at=now)
        pr["head"].update(label=f"{head_owner}:{head_ref}", user={**pr["head"]["user"], "login": head_owner})
        pr["base"].update(label=f"{owner}:{base}", ref=base)
        self.pulls[(full, number)] = pr
        return pr

    def issue_comment_json(self, full: str, number: int, cid: int, body: str, *, author: str | None = None,
                           created: datetime | None = None) -> dict[str, Any]:
        at = iso(created or datetime.now(UTC))
        login = author or self.login
        return {
            "id": cid, "node_id": f"IC_kwDO{cid}", "url": f"{self.api_url}/repos/{full}/issues/comments/{cid}",
            "html_url": f"https://github.com/{full}/pull/{number}#issuecomment-{cid}", "body": body,
            "user": {"login": login, "id": 7001 if login == self.login else 501,
                     "type": "Bot" if login == self.login else "User", "url": f"{self.api_url}/users/{login}"},
            "created_at": at, "updated_at": at, "issue_url": f"{self.api_url}/repos/{full}/issues/{number}",
            "author_association": "NONE" if login == self.login else "MEMBER",
        }

    def add_comment(self, full: str, number: int, body: str, *, author: str | None = None) -> dict[str, Any]:
        with self.lock:
            cid = self.next_comment_id
            self.next_comment_id += 1
        comment = self.issue_comment_json(full, number, cid, body, author=author)
        self.issue_comments.setdefault((full, number), []).append(comment)
        return comment

    def requests_to(self, pattern: str, server: str = "api") -> list[Seen]:
        return [s for s in self.seen if s.server == server and re.search(pattern, s.path)]

    # -- shapes --
    def repo_json(self, full: str) -> dict[str, Any]:
        owner, name = full.split("/")
        return {
            "id": 481516, "node_id": "R_kgDOHKd3Eg", "name": name, "full_name": full, "private": True,
            "owner": {"login": owner, "id": 9919, "node_id": "O_kgDOAAAmvw", "type": "Organization",
                      "url": f"{self.api_url}/users/{owner}", "html_url": f"https://github.com/{owner}"},
            "html_url": f"https://github.com/{full}", "description": "Payments API",
            "url": f"{self.api_url}/repos/{full}", "default_branch": "main", "visibility": "private",
            "created_at": "2021-03-02T10:00:00Z", "updated_at": "2024-05-15T08:00:00Z",
            "pushed_at": "2024-05-15T08:10:00Z", "archived": False, "disabled": False,
        }

    def run_json(self, full: str, run_id: int, *, name: str, workflow_id: int, head_sha: str = SHA,
                 branch: str = BRANCH, conclusion: str | None = "failure", status: str = "completed",
                 number: int = 812, created: datetime = T0, event: str = "pull_request") -> dict[str, Any]:
        base = f"{self.api_url}/repos/{full}/actions/runs/{run_id}"
        return {
            "id": run_id, "name": name, "node_id": f"WFR_{run_id}", "head_branch": branch, "head_sha": head_sha,
            "path": f".github/workflows/{name.lower()}.yml", "display_title": "Retry failed webhook deliveries",
            "run_number": number, "run_attempt": 1, "event": event, "status": status, "conclusion": conclusion,
            "workflow_id": workflow_id, "check_suite_id": run_id * 10, "url": base,
            "html_url": f"https://github.com/{full}/actions/runs/{run_id}",
            "jobs_url": f"{base}/jobs", "logs_url": f"{base}/logs", "artifacts_url": f"{base}/artifacts",
            "check_suite_url": f"{self.api_url}/repos/{full}/check-suites/{run_id * 10}",
            "cancel_url": f"{base}/cancel", "rerun_url": f"{base}/rerun",
            "workflow_url": f"{self.api_url}/repos/{full}/actions/workflows/{workflow_id}",
            "created_at": iso(created), "updated_at": iso(created + timedelta(minutes=2)),
            "run_started_at": iso(created), "pull_requests": [],
        }

    def job_json(self, full: str, run_id: int, job_id: int, *, name: str, workflow: str,
                 steps: list[tuple[str, str]], conclusion: str = "failure", head_sha: str = SHA,
                 completed: datetime = T0 + timedelta(seconds=37)) -> dict[str, Any]:
        step_list = []
        for n, (step_name, step_conclusion) in enumerate(steps, start=1):
            step_list.append({"name": step_name, "status": "completed", "conclusion": step_conclusion,
                              "number": n, "started_at": iso(T0 + timedelta(seconds=n)),
                              "completed_at": iso(T0 + timedelta(seconds=n + 1))})
        return {
            "id": job_id, "run_id": run_id, "workflow_name": workflow, "head_branch": BRANCH, "head_sha": head_sha,
            "run_url": f"{self.api_url}/repos/{full}/actions/runs/{run_id}", "run_attempt": 1,
            "node_id": f"CR_{job_id}", "url": f"{self.api_url}/repos/{full}/actions/jobs/{job_id}",
            "html_url": f"https://github.com/{full}/actions/runs/{run_id}/job/{job_id}",
            "status": "completed", "conclusion": conclusion, "created_at": iso(T0),
            "started_at": iso(T0), "completed_at": iso(completed), "name": name, "steps": step_list,
            "check_run_url": f"{self.api_url}/repos/{full}/check-runs/{job_id}",
            "labels": ["ubuntu-latest"], "runner_id": 7, "runner_name": "GitHub Actions 7",
            "runner_group_id": 1, "runner_group_name": "GitHub Actions",
        }

    def artifact_json(self, full: str, run_id: int, artifact_id: int, name: str, size: int,
                      expired: bool = False) -> dict[str, Any]:
        base = f"{self.api_url}/repos/{full}/actions/artifacts/{artifact_id}"
        return {
            "id": artifact_id, "node_id": f"MDg6QXJ0aWZhY3Q{artifact_id}", "name": name, "size_in_bytes": size,
            "url": base, "archive_download_url": f"{base}/zip", "expired": expired,
            "digest": "sha256:" + "ab" * 32, "created_at": iso(T0 + timedelta(seconds=40)),
            "expires_at": iso(T0 + timedelta(days=90)), "updated_at": iso(T0 + timedelta(seconds=40)),
            "workflow_run": {"id": run_id, "repository_id": 481516, "head_repository_id": 481516,
                             "head_branch": BRANCH, "head_sha": SHA},
        }

    def pr_json(self, full: str, number: int, head_sha: str = PR_SHA, head_ref: str = BRANCH) -> dict[str, Any]:
        repo = self.repo_json(full)
        user = {"login": "devin", "id": 501, "type": "User", "url": f"{self.api_url}/users/devin"}
        return {
            "url": f"{self.api_url}/repos/{full}/pulls/{number}", "id": 1800000000 + number,
            "node_id": f"PR_kwDO{number}", "html_url": f"https://github.com/{full}/pull/{number}",
            "number": number, "state": "open", "locked": False, "title": "Retry failed webhook deliveries",
            "user": user, "body": "Implements ADR-0007.", "created_at": "2024-05-14T09:00:00Z",
            "updated_at": "2024-05-15T09:00:00Z", "draft": False,
            "head": {"label": f"{full.split('/')[0]}:{head_ref}", "ref": head_ref, "sha": head_sha,
                     "user": user, "repo": repo},
            "base": {"label": f"{full.split('/')[0]}:main", "ref": "main", "sha": "1" * 40, "user": user,
                     "repo": repo},
            "comments_url": f"{self.api_url}/repos/{full}/issues/{number}/comments",
            "review_comments_url": f"{self.api_url}/repos/{full}/pulls/{number}/comments",
        }

    def comment_json(self, full: str, number: int, cid: int, *, author: str, body: str, path: str, line: int | None,
                     hunk: str, created: datetime, reply_to: int | None = None,
                     original_line: int | None = None) -> dict[str, Any]:
        return {
            "url": f"{self.api_url}/repos/{full}/pulls/comments/{cid}", "id": cid, "node_id": f"PRRC_{cid}",
            "pull_request_review_id": 9000 + cid, "diff_hunk": hunk, "path": path, "commit_id": PR_SHA,
            "original_commit_id": PR_SHA, "user": {"login": author, "id": cid, "type": "User"},
            "body": body, "created_at": iso(created), "updated_at": iso(created),
            "html_url": f"https://github.com/{full}/pull/{number}#discussion_r{cid}",
            "pull_request_url": f"{self.api_url}/repos/{full}/pulls/{number}", "author_association": "MEMBER",
            "line": line, "original_line": original_line if original_line is not None else line,
            "start_line": None, "original_start_line": None, "side": "RIGHT", "subject_type": "line",
            **({"in_reply_to_id": reply_to} if reply_to else {}),
        }

    def review_json(self, full: str, number: int, rid: int, *, author: str, state: str, body: str,
                    submitted: datetime, commit_id: str = PR_SHA) -> dict[str, Any]:
        return {
            "id": rid, "node_id": f"PRR_{rid}", "user": {"login": author, "id": rid, "type": "User"},
            "body": body, "state": state, "commit_id": commit_id, "submitted_at": iso(submitted),
            "html_url": f"https://github.com/{full}/pull/{number}#pullrequestreview-{rid}",
            "pull_request_url": f"{self.api_url}/repos/{full}/pulls/{number}", "author_association": "MEMBER",
        }

    def files_json(self, full: str, number: int) -> list[dict[str, Any]]:
        """GET /pulls/N/files for `diff_lines`: each run of lines one hunk (its first and last
        line context, the others added), as GitHub's patch text; none configured, no files."""
        files = []
        for path, lines in sorted(self.diff_lines.get((full, number), {}).items()):
            runs: list[list[int]] = []
            for n in sorted(lines):
                if runs and n == runs[-1][-1] + 1:
                    runs[-1].append(n)
                else:
                    runs.append([n])
            hunks = []
            for run in runs:
                ctx = {run[0], run[-1]} if len(run) > 2 else set()
                body = [f" line {n}" if n in ctx else f"+line {n}" for n in run]
                hunks.append(f"@@ -{run[0]},{len(ctx)} +{run[0]},{len(run)} @@ def f():\n" + "\n".join(body))
            added = sum(len(r) - (2 if len(r) > 2 else 0) for r in runs)
            blob = f"https://github.com/{full}/blob/{PR_SHA}/{path}"
            files.append({"sha": "a" * 40, "filename": path, "status": "modified", "additions": added,
                          "deletions": 0, "changes": added, "blob_url": blob,
                          "raw_url": blob.replace("/blob/", "/raw/"),
                          "contents_url": f"{self.api_url}/repos/{full}/contents/{path}?ref={PR_SHA}",
                          "patch": "\n".join(hunks)})
        return files

    def check_run_json(self, full: str, cid: int, name: str, head_sha: str, conclusion: str,
                       annotations: int) -> dict[str, Any]:
        return {
            "id": cid, "node_id": f"CR_{cid}", "head_sha": head_sha, "external_id": "", "name": name,
            "url": f"{self.api_url}/repos/{full}/check-runs/{cid}",
            "html_url": f"https://github.com/{full}/runs/{cid}", "details_url": f"https://github.com/{full}/runs/{cid}",
            "status": "completed", "conclusion": conclusion, "started_at": iso(T0),
            "completed_at": iso(T0 + timedelta(minutes=1)),
            "output": {"title": "Tests failed", "summary": "", "text": None, "annotations_count": annotations,
                       "annotations_url": f"{self.api_url}/repos/{full}/check-runs/{cid}/annotations"},
            "check_suite": {"id": 1}, "app": {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"},
            "pull_requests": [],
        }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: object) -> None:  # quiet test output
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str], ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        base = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4990",
                "x-ratelimit-reset": str(int(time.time()) + 3600), "x-ratelimit-resource": "core",
                "x-github-api-version-selected": "2022-11-28"}
        self._send(status, json.dumps(data).encode(), {**base, **(headers or {})},
                   "application/json; charset=utf-8")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        fake = self.server.fake
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with fake.lock:
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen = Seen(self.server.role, method, path, query, headers, body)
            fake.seen.append(seen)
        for hook in list(fake.hooks):
            hook(seen)
        for pattern, delay in list(fake.delays.items()):
            if re.search(pattern, path):
                time.sleep(delay)
        if self.server.role == "storage":
            return self._storage(path)
        for failure in fake.failures:
            if failure.pattern.search(path) and failure.times != 0 and failure.method in (None, method):
                if failure.times is not None:
                    failure.times -= 1
                return self._json(failure.status, failure.body, failure.headers)
        if method == "POST" and (m := re.fullmatch(r"/api/v3/app/installations/(\d+)/access_tokens", path)):
            return self._access_token(int(m.group(1)))
        auth = self.headers.get("Authorization", "")
        if not (auth.startswith("token ") and auth[len("token "):] in fake.tokens):
            return self._json(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        if method == "POST" and path == "/api/graphql":
            return self._graphql(body or {})
        if method == "GET" and path == "/api/v3/user":  # whose token: an installation token may not ask
            if fake.app is not None and auth[len("token "):] == fake.app.get("token"):
                return self._json(403, {"message": "Resource not accessible by integration",
                                        "documentation_url": "https://docs.github.com/rest"})
            return self._json(200, {"login": fake.login, "id": 7001, "type": "Bot",
                                    "url": f"{fake.api_url}/users/{fake.login}"})
        if method == "GET" and path.startswith("/api/v3/"):
            return self._rest(path[len("/api/v3"):], query)
        if method in ("POST", "PATCH") and path.startswith("/api/v3/"):
            return self._write(method, path[len("/api/v3"):], body)
        self._not_found()

    def _not_found(self) -> None:
        self._json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})

    def _storage(self, path: str) -> None:
        fake = self.server.fake
        if m := re.fullmatch(r"/storage/logs/(\d+)", path):
            log = fake.logs.get(int(m.group(1)))
            if log is not None:
                return self._send(200, log, {}, "text/plain; charset=utf-8")
        if m := re.fullmatch(r"/storage/artifacts/(\d+)\.zip", path):
            data = fake.zips.get(int(m.group(1)))
            if data is not None:
                return self._send(200, data, {}, "application/zip")
        self._send(404, b"<Error><Code>BlobNotFound</Code></Error>", {}, "application/xml")

    def _redirect(self, location: str) -> None:
        self._send(302, b"", {"Location": location}, "text/plain")

    def _rest(self, path: str, q: dict[str, str]) -> None:
        fake = self.server.fake
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        if not m or m.group(1) not in fake.repos:
            return self._not_found()
        full, rest = m.group(1), m.group(2) or ""
        if rest == "":
            return self._json(200, fake.repos[full])
        if rest == "/actions/runs":
            runs = fake.runs.get(full, [])
            if "branch" in q:
                runs = [r for r in runs if r["head_branch"] == q["branch"]]
            if "head_sha" in q:
                runs = [r for r in runs if r["head_sha"] == q["head_sha"]]
            if "status" in q:
                runs = [r for r in runs if q["status"] in (r["status"], r["conclusion"])]
            runs = sorted(runs, key=lambda r: r["created_at"], reverse=True)
            page = runs[: int(q.get("per_page", 30))]
            return self._json(200, {"total_count": len(runs), "workflow_runs": page})
        if mm := re.fullmatch(r"/actions/runs/(\d+)/jobs", rest):
            jobs = fake.jobs.get(int(mm.group(1)), [])
            return self._json(200, {"total_count": len(jobs), "jobs": jobs})
        if mm := re.fullmatch(r"/actions/jobs/(\d+)/logs", rest):
            if int(mm.group(1)) not in fake.logs:
                return self._not_found()
            return self._redirect(f"{fake.storage_url}/storage/logs/{mm.group(1)}?sv=2021-08-06&sig=abc%3D")
        if mm := re.fullmatch(r"/actions/runs/(\d+)/artifacts", rest):
            arts = fake.artifacts.get(int(mm.group(1)), [])
            return self._json(200, {"total_count": len(arts), "artifacts": arts})
        if mm := re.fullmatch(r"/actions/artifacts/(\d+)/zip", rest):
            return self._redirect(f"{fake.storage_url}/storage/artifacts/{mm.group(1)}.zip?sig=def%3D")
        if rest == "/pulls":
            pulls = [p for (r, _), p in fake.pulls.items() if r == full and p["state"] == q.get("state", "open")]
            # GitHub filters by head only in the user:ref-name form; a bare branch name is ignored
            # (every open PR comes back), a trap a client must not fall into.
            if ":" in q.get("head", ""):
                pulls = [p for p in pulls if p["head"]["label"].lower() == q["head"].lower()]
            return self._json(200, pulls)
        if mm := re.fullmatch(r"/issues/(\d+)/comments", rest):
            key = (full, int(mm.group(1)))
            if key not in fake.pulls and key not in fake.issues:
                return self._not_found()
            return self._page(fake.issue_comments.get(key, []), q, f"{fake.api_url}/repos/{full}{rest}")
        if mm := re.fullmatch(r"/pulls/(\d+)(/comments|/reviews|/files|/reviews/(\d+)/comments)?", rest):
            key = (full, int(mm.group(1)))
            if key not in fake.pulls:
                return self._not_found()
            url = f"{fake.api_url}/repos/{full}{rest}"
            if mm.group(2) == "/comments":
                return self._json(200, fake.review_comments.get(key, []))
            if mm.group(2) == "/reviews":
                return self._page(fake.reviews.get(key, []), q, url)
            if mm.group(2) == "/files":
                return self._page(fake.files_json(*key), q, url)
            if mm.group(3):
                rid = int(mm.group(3))
                if not any(r["id"] == rid for r in fake.reviews.get(key, [])):
                    return self._not_found()
                return self._page([c for c in fake.review_comments.get(key, [])
                                   if c["pull_request_review_id"] == rid], q, url)
            return self._json(200, fake.pulls[key])
        if mm := re.fullmatch(r"/commits/([0-9a-f]{40})/check-runs", rest):
            checks = fake.check_runs.get(mm.group(1), [])
            return self._json(200, {"total_count": len(checks), "check_runs": checks})
        if mm := re.fullmatch(r"/check-runs/(\d+)/annotations", rest):
            return self._json(200, fake.annotations.get(int(mm.group(1)), []))
        self._not_found()

    def _page(self, items: list[dict[str, Any]], q: dict[str, str], url: str) -> None:
        """One page of a list and GitHub's Link header (next/last, prev/first) for the others."""
        fake = self.server.fake
        per_page = max(1, min(int(q.get("per_page", 30)), fake.max_per_page))
        page = max(1, int(q.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        links = []

        def link(n: int, rel: str) -> str:
            return f'<{url}?{urllib.parse.urlencode({"per_page": per_page, "page": n})}>; rel="{rel}"'

        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        headers = {"Link": ", ".join(links)} if links else {}
        self._json(200, items[(page - 1) * per_page: page * per_page], headers)

    def _invalid(self, errors: list[dict[str, Any]]) -> None:
        self._json(422, {"message": "Validation Failed", "errors": errors,
                         "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
                         "status": "422"})

    def _unprocessable(self, error: str) -> None:
        """GitHub's 422 for a review it cannot place: errors as plain strings."""
        self._json(422, {"message": "Unprocessable Entity", "errors": [error],
                         "documentation_url": "https://docs.github.com/rest/pulls/reviews"
                                              "#create-a-review-for-a-pull-request", "status": "422"})

    def _write(self, method: str, path: str, body: Any) -> None:
        """POST/PATCH of pull requests and issue comments, validated as GitHub validates them."""
        fake = self.server.fake
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)", path)
        if not m or m.group(1) not in fake.repos:
            return self._not_found()
        full, rest = m.group(1), m.group(2)
        if not isinstance(body, dict):
            return self._json(400, {"message": "Problems parsing JSON",
                                    "documentation_url": "https://docs.github.com/rest"})
        data: dict[str, Any] = body
        if method == "POST" and rest == "/pulls":
            missing = [f for f in ("head", "base") if not data.get(f)]
            if not data.get("title") and not data.get("issue"):
                missing.insert(0, "title")
            if missing:
                return self._invalid([{"resource": "PullRequest", "field": f, "code": "missing_field"}
                                      for f in missing])
            owner = full.split("/")[0]
            head = data["head"] if ":" in data["head"] else f"{owner}:{data['head']}"
            if head.lower() == f"{owner}:{data['base']}".lower():
                return self._invalid([{"resource": "PullRequest", "code": "custom",
                                       "message": f"No commits between {data['base']} and {data['head']}"}])
            with fake.lock:
                if any(p["head"]["label"].lower() == head.lower() and p["base"]["ref"] == data["base"]
                       for p in fake.open_pulls(full)):
                    return self._invalid([{"resource": "PullRequest", "code": "custom",
                                           "message": f"A pull request already exists for {head}."}])
                pr = fake.new_pull(full, head=head, base=data["base"], title=data["title"], body=data.get("body"))
            return self._json(201, pr, {"Location": pr["url"]})
        if method == "PATCH" and (mm := re.fullmatch(r"/pulls/(\d+)", rest)):
            key = (full, int(mm.group(1)))
            if key not in fake.pulls:
                return self._not_found()
            pr = fake.pulls[key]
            if "title" in data and not data["title"]:
                return self._invalid([{"resource": "PullRequest", "field": "title", "code": "missing_field"}])
            for f in ("title", "body", "state"):
                if f in data:
                    pr[f] = data[f]
            if "base" in data:
                pr["base"].update(ref=data["base"], label=f"{full.split('/')[0]}:{data['base']}")
            pr["updated_at"] = iso(datetime.now(UTC))
            return self._json(200, pr)
        if method == "POST" and (mm := re.fullmatch(r"/pulls/(\d+)/reviews", rest)):
            key = (full, int(mm.group(1)))
            if key not in fake.pulls:
                return self._not_found()
            comments = data.get("comments") or []
            if data.get("event") not in (None, "COMMENT", "APPROVE", "REQUEST_CHANGES"):
                return self._invalid([{"resource": "PullRequestReview", "field": "event", "code": "invalid"}])
            if data.get("event") in ("COMMENT", "REQUEST_CHANGES") and not data.get("body"):
                return self._unprocessable("Body is required when using COMMENT or REQUEST_CHANGES")
            lines = fake.diff_lines.get(key)
            for c in comments:
                if not c.get("path") or not c.get("body") or not isinstance(c.get("line"), int):
                    return self._invalid([{"resource": "PullRequestReviewComment", "code": "missing_field"}])
                if c.get("side", "RIGHT") not in ("LEFT", "RIGHT"):
                    return self._invalid([{"resource": "PullRequestReviewComment", "field": "side",
                                           "code": "invalid"}])
                # GitHub's answers, word for word; none says which comment it was.
                if lines is not None and c["path"] not in lines:
                    return self._unprocessable("Path could not be resolved")
                if lines is not None and c["line"] not in lines[c["path"]]:
                    return self._unprocessable("Pull request review thread line must be part of the diff and "
                                               "Pull request review thread diff hunk can't be blank")
            commit_id = data.get("commit_id") or fake.pulls[key]["head"]["sha"]
            with fake.lock:
                rid = 5_000_000 + sum(len(v) for v in fake.reviews.values()) + 1
                state = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED",
                         "REQUEST_CHANGES": "CHANGES_REQUESTED"}.get(data.get("event") or "", "PENDING")
                review = fake.review_json(full, key[1], rid, author=fake.login, state=state,
                                          body=data.get("body") or "", submitted=datetime.now(UTC),
                                          commit_id=commit_id)
                fake.reviews.setdefault(key, []).append(review)
                for n, c in enumerate(comments):
                    made = fake.comment_json(full, key[1], rid * 100 + n, author=fake.login, body=c["body"],
                                             path=c["path"], line=c["line"], hunk="", created=datetime.now(UTC))
                    made.update(pull_request_review_id=rid, commit_id=commit_id, side=c.get("side", "RIGHT"))
                    fake.review_comments.setdefault(key, []).append(made)
            return self._json(200, review)
        if method == "POST" and (mm := re.fullmatch(r"/issues/(\d+)/comments", rest)):
            key = (full, int(mm.group(1)))
            if key not in fake.pulls and key not in fake.issues:
                return self._not_found()
            if not isinstance(data.get("body"), str) or not data["body"]:
                return self._invalid([{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
            comment = fake.add_comment(full, key[1], data["body"])
            return self._json(201, comment, {"Location": comment["url"]})
        if method == "PATCH" and (mm := re.fullmatch(r"/issues/comments/(\d+)", rest)):
            cid = int(mm.group(1))
            for (r, _), comments in fake.issue_comments.items():
                for comment in comments:
                    if r == full and comment["id"] == cid:
                        if not isinstance(data.get("body"), str) or not data["body"]:
                            return self._invalid([{"resource": "IssueComment", "field": "body",
                                                   "code": "missing_field"}])
                        comment.update(body=data["body"], updated_at=iso(datetime.now(UTC)))
                        return self._json(200, comment)
            return self._not_found()
        self._not_found()

    def _graphql(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        v = body.get("variables") or {}
        key = (f"{v.get('owner')}/{v.get('name')}", int(v.get("number", 0)))
        if "reviewThreads" not in body.get("query", "") or key not in fake.pulls:
            return self._json(200, {"data": {"repository": None}, "errors": [
                {"type": "NOT_FOUND", "path": ["repository"],
                 "message": f"Could not resolve to a Repository with the name '{key[0]}'."}]})
        if fake.graphql_error is not None:
            return self._json(200, {"errors": [fake.graphql_error]},
                              {"x-ratelimit-remaining": "0", "x-ratelimit-resource": "graphql"})
        threads = fake.threads.get(key, [])
        start = int(base64.b64decode(v["after"]).decode()) if v.get("after") else 0
        page = threads[start:start + 2]  # two per page: pagination is exercised
        end = start + len(page)
        nodes = [{"isResolved": r, "isOutdated": o, "comments": {"nodes": [{"databaseId": i} for i in ids]}}
                 for r, o, ids in page]
        info = {"hasNextPage": end < len(threads), "endCursor": base64.b64encode(str(end).encode()).decode()}
        self._json(200, {"data": {"repository": {"pullRequest": {"reviewThreads": {"pageInfo": info,
                                                                                   "nodes": nodes}}}}})

    def _access_token(self, installation_id: int) -> None:
        import jwt  # pyjwt, a PyGithub dependency

        app = self.server.fake.app
        auth = self.headers.get("Authorization", "")
        if app is None or installation_id != app["installation_id"] or not auth.startswith("Bearer "):
            return self._not_found()
        try:
            claims = jwt.decode(auth[len("Bearer "):], app["public_key"], algorithms=["RS256"])
        except jwt.PyJWTError:
            return self._json(401, {"message": "A JSON web token could not be decoded",
                                    "documentation_url": "https://docs.github.com/rest"})
        if str(claims.get("iss")) != str(app["app_id"]):
            return self._json(401, {"message": "'Issuer' claim ('iss') must be an Integer"})
        expires = datetime.now(UTC) + timedelta(hours=1)
        self._json(201, {"token": app["token"], "expires_at": iso(expires),
                         "permissions": {"actions": "read", "checks": "read", "pull_requests": "read"},
                         "repository_selection": "all"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeGitHub, role: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self.role = role


@contextmanager
def serving() -> Iterator[FakeGitHub]:
    """A FakeGitHub with its API and storage servers running, the test repository known."""
    fake = FakeGitHub()
    api, storage = _Server(fake, "api"), _Server(fake, "storage")
    fake.api_url = f"http://127.0.0.1:{api.server_address[1]}/api/v3"
    fake.storage_url = f"http://127.0.0.1:{storage.server_address[1]}"
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
               for s in (api, storage)]
    for t in threads:
        t.start()
    fake.repos[REPO] = fake.repo_json(REPO)
    try:
        yield fake
    finally:
        for s in (api, storage):
            s.shutdown()
            s.server_close()


def card(**fields: Any) -> Card:
    data: dict[str, Any] = {"id": "PAY-142", "tenant": "acme", "board": "github-projects",
                            "title": "Retry failed webhook deliveries", "repo": REPO, "branch": BRANCH}
    data.update(fields)
    return Card.model_validate(data)


def req(c: Card, stage: Stage = Stage.ERROR_FIXING) -> SourceRequest:
    return SourceRequest(card=c, stage=stage)


# --- realistic logs -------------------------------------------------------------------------


def gha_lines(lines: list[str], start: datetime) -> str:
    """Lines as GitHub stores them: a BOM, then each line after an ISO timestamp."""
    out = [f"{(start + timedelta(milliseconds=9 * i)).strftime('%Y-%m-%dT%H:%M:%S.%f')}0Z {line}"
           for i, line in enumerate(lines)]
    return "\ufeff" + "\n".join(out) + "\n"


def go_job_log() -> str:
    go = (LOGS / "go_test_panic.log").read_text().splitlines()
    lines = [
        "Current runner version: '2.316.1'", "##[group]Operating System", "Ubuntu", "22.04.4", "LTS", "##[endgroup]",
        "##[group]Run actions/checkout@v4", "with:", "  repository: acme/ledger", "  token: ***", "##[endgroup]",
        "Syncing repository: acme/ledger",
        "##[group]Run actions/setup-go@v5", "with:", "  go-version: 1.22", "##[endgroup]",
        "Setup go version spec 1.22", "Found in cache @ /opt/hostedtoolcache/go/1.22.3/x64",
        "##[group]Run make test", "make test", "shell: /usr/bin/bash -e {0}", "##[endgroup]",
        *go, "##[error]Process completed with exit code 2.",
        "Post job cleanup.", "[command]/usr/bin/git version", "git version 2.45.0", "Cleaning up orphan processes",
    ]
    return gha_lines(lines, T0)


PYTEST_STEPS = [("Set up job", "success"), ("Run actions/checkout@v4", "success"),
                ("Run actions/setup-python@v5", "success"), ("Run pip install -e '.[dev]'", "success"),
                ("Run ruff check . && ruff format --check .", "success"), ("Run mypy app", "success"),
                ("Run alembic upgrade head", "success"), (PYTEST_STEP, "failure"),
                ("Run actions/upload-artifact@v4", "success"), ("Post Run actions/checkout@v4", "success"),
                ("Complete job", "success")]
TSC_STEPS = [("Set up job", "success"), ("Run actions/checkout@v4", "success"),
             ("Run actions/setup-node@v4", "success"), ("Install", "success"), ("Lint", "success"),
             ("Build", "failure"), ("Complete job", "success")]
GO_STEPS = [("Set up job", "success"), ("Run actions/checkout@v4", "success"), ("Run actions/setup-go@v5", "success"),
            ("Run make test", "failure"), ("Complete job", "success")]


@dataclass
class CI:
    pytest_log: bytes
    tsc_log: bytes
    go_log: bytes


def seed_ci(fake: FakeGitHub, *, head_sha: str = SHA, pytest_log: bytes | None = None) -> CI:
    """Three failed runs (CI, Frontend, Go) newest first, an older failed CI run of the same
    workflow, and a successful run: each failed run has one failed job with a real log."""
    ci = CI(pytest_log=pytest_log or (LOGS / "gha_pytest_failure.log").read_bytes(),
            tsc_log=(LOGS / "tsc_build_error.log").read_bytes(), go_log=go_job_log().encode())
    runs = [
        fake.run_json(REPO, 1001, name="CI", workflow_id=11, head_sha=head_sha, created=T0 + timedelta(minutes=30)),
        fake.run_json(REPO, 1002, name="Frontend", workflow_id=12, head_sha=head_sha,
                      created=T0 + timedelta(minutes=20)),
        fake.run_json(REPO, 1003, name="Go", workflow_id=13, head_sha=head_sha, created=T0 + timedelta(minutes=10)),
        fake.run_json(REPO, 1000, name="CI", workflow_id=11, head_sha="0" * 40, created=T0),
        fake.run_json(REPO, 1004, name="Docs", workflow_id=14, head_sha=head_sha, conclusion="success",
                      created=T0 + timedelta(minutes=40)),
    ]
    fake.runs[REPO] = runs
    fake.jobs[1001] = [
        fake.job_json(REPO, 1001, 2001, name="lint", workflow="CI", steps=[("Set up job", "success")],
                      conclusion="success", head_sha=head_sha),
        fake.job_json(REPO, 1001, 2002, name="test (3.11)", workflow="CI", steps=PYTEST_STEPS, head_sha=head_sha),
    ]
    fake.jobs[1002] = [fake.job_json(REPO, 1002, 2003, name="build", workflow="Frontend", steps=TSC_STEPS,
                                     head_sha=head_sha)]
    fake.jobs[1003] = [fake.job_json(REPO, 1003, 2004, name="test", workflow="Go", steps=GO_STEPS,
                                     head_sha=head_sha)]
    fake.jobs[1000] = [fake.job_json(REPO, 1000, 2000, name="test (3.11)", workflow="CI", steps=PYTEST_STEPS)]
    fake.logs.update({2002: ci.pytest_log, 2003: ci.tsc_log, 2004: ci.go_log, 2000: b"old"})
    return ci


def by_job(result: SourceResult) -> dict[str, Any]:
    return {item.source.rsplit("/", 1)[-1]: item for item in result.items}


HUNK = """@@ -48,12 +48,16 @@ class RetryPolicy:
     def delay_for(self, attempt: int, retry_after: str | None = None) -> float:
         if retry_after is not None:
             return min(parse_retry_after(retry_after), self.max_delay)
-        return self.base_delay * self.factor ** (attempt - 1)
+        raw = self.base_delay * self.factor ** (attempt - 1)
+        jitter = random.uniform(0, raw) if self.jitter else raw
+        return jitter"""


def seed_reviews(fake: FakeGitHub) -> None:
    fake.pulls[(REPO, 57)] = fake.pr_json(REPO, 57)
    t = datetime(2024, 5, 15, 9, 0, tzinfo=UTC)
    c = fake.comment_json
    fake.review_comments[(REPO, 57)] = [
        c(REPO, 57, 101, author="priya", body="Cap at max_delay *before* the jitter, or the cap never holds.",
          path="app/webhooks/retry.py", line=56, hunk=HUNK, created=t),
        c(REPO, 57, 103, author="priya", body="This swallows the 410 case.", path="app/webhooks/delivery.py",
          line=113, hunk="@@ -110,3 +110,4 @@\n+        except Gone:\n+            pass", created=t),
        c(REPO, 57, 102, author="tomasz", body="Agreed; ADR-0007 says min(cap, base * 2 ** n) first.",
          path="app/webhooks/retry.py", line=56, hunk=HUNK, created=t + timedelta(hours=1), reply_to=101),
        c(REPO, 57, 104, author="tomasz", body="Durations should accept `30s` like the rest of the settings.",
          path="app/settings.py", line=None, original_line=20,
          hunk="@@ -18,2 +18,3 @@\n WEBHOOK_RETRY_BASE_DELAY: float = 30.0", created=t + timedelta(hours=2)),
    ]
    fake.threads[(REPO, 57)] = [(False, False, [101, 102]), (True, False, [103]), (False, True, [104])]
    fake.reviews[(REPO, 57)] = [
        fake.review_json(REPO, 57, 801, author="priya", state="CHANGES_REQUESTED",
                         body="Two blocking issues: the cap and the 410 handling.", submitted=t),
        fake.review_json(REPO, 57, 802, author="tomasz", state="APPROVED", body="", submitted=t),
        fake.review_json(REPO, 57, 803, author="tomasz", state="COMMENTED", body="", submitted=t),
    ]


JUNIT_UNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5" time="41.27"
 timestamp="2024-05-15T08:11:33" hostname="fv-az1">
<testcase classname="tests.test_health" name="test_health" time="0.010"/>
<testcase classname="tests.test_retry" name="test_backoff_schedule_caps_at_max_delay" time="0.003"
 file="tests/test_retry.py" line="52"><failure
 message="assert [1.0, 2.0, 4.0, 8.0, 16.0, 32.0] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]"
>def test_backoff_schedule_caps_at_max_delay() -&gt; None:
    policy = RetryPolicy(base_delay=1.0, factor=2.0, max_delay=30.0, max_attempts=7, jitter=0.0)
    delays = [policy.delay_for(attempt) for attempt in range(1, 7)]
&gt;   assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
E   assert [1.0, 2.0, 4.0, 8.0, 16.0, 32.0] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
E     At index 5 diff: 32.0 != 30.0

tests/test_retry.py:56: AssertionError</failure></testcase>
<testcase classname="tests.webhooks.test_delivery" name="test_delivery_retries_on_503" time="0.041">
<error message="TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'"
>respx_mock = &lt;respx.router.MockRouter object at 0x7f3a5c2d1e50&gt;
delivery_service = &lt;app.webhooks.delivery.DeliveryService object at 0x7f3a5c2d3f10&gt;

    async def test_delivery_retries_on_503(respx_mock, delivery_service) -&gt; None:
        route = respx_mock.post("https://merchant.example/hooks").mock(
            side_effect=[httpx.Response(503), httpx.Response(503), httpx.Response(200)]
        )
&gt;       result = await delivery_service.deliver(make_event("payment.succeeded"))

tests/webhooks/test_delivery.py:36:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
app/webhooks/delivery.py:113: in _attempt
    delay = self.policy.delay_for(attempt, retry_after=retry_after)
&gt;       raw = self.base_delay * self.factor ** (attempt - 1)
E       TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'

app/webhooks/retry.py:56: TypeError</error></testcase>
<testcase classname="tests.test_signing" name="test_signature_header" time="0.002"/>
<testcase classname="tests.test_metrics" name="test_dead_letter_counter" time="0.001">
<skipped message="flaky"/></testcase>
</testsuite></testsuites>
"""

JUNIT_INTEGRATION = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="integration" tests="2" failures="1" errors="0">
  <testcase classname="tests.integration.test_dispatcher" name="test_skip_locked_never_double_sends" time="1.2">
    <failure message="AssertionError: attempt 2 sent twice" type="AssertionError">assert sent.count(("evt_1", 2)) == 1
AssertionError: attempt 2 sent twice</failure>
  </testcase>
  <testcase classname="tests.integration.test_dispatcher" name="test_dead_letter_after_8_attempts" time="2.0"/>
</testsuite>
"""

COVERAGE = """<?xml version="1.0" ?><coverage version="7.5.1" line-rate="0.97"><packages/></coverage>"""


def make_zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


def seed_tests(fake: FakeGitHub, *, artifacts: bool = True) -> None:
    fake.runs[REPO] = [
        fake.run_json(REPO, 3002, name="CI", workflow_id=11, status="in_progress", conclusion=None,
                      head_sha="f" * 40, created=T0 + timedelta(hours=1)),
        fake.run_json(REPO, 3001, name="CI", workflow_id=11, created=T0 + timedelta(minutes=5)),
        fake.run_json(REPO, 3000, name="CI", workflow_id=11, head_sha="0" * 40, created=T0),
    ]
    if artifacts:
        data = make_zip({"reports/junit.xml": JUNIT_UNIT, "reports/integration/junit-int.xml": JUNIT_INTEGRATION,
                         "coverage.xml": COVERAGE, "pytest-output.txt": "2 failed, 212 passed"})
        fake.artifacts[3001] = [fake.artifact_json(REPO, 3001, 4001, "junit-3.11", len(data)),
                                fake.artifact_json(REPO, 3001, 4002, "junit-3.10", 1234, expired=True)]
        fake.zips[4001] = data
    fake.check_runs[SHA] = [
        fake.check_run_json(REPO, 5001, "test (3.11)", SHA, "failure", annotations=3),
        fake.check_run_json(REPO, 5002, "lint", SHA, "success", annotations=0),
    ]
    ann = {"path": "tests/test_retry.py", "start_line": 56, "end_line": 56, "start_column": None,
           "end_column": None, "annotation_level": "failure",
           "blob_href": f"https://github.com/{REPO}/blob/{SHA}/tests/test_retry.py"}
    fake.annotations[5001] = [
        {**ann, "title": "tests/test_retry.py::test_backoff_schedule_caps_at_max_delay",
         "message": "assert [1.0, 2.0, 4.0, 8.0, 16.0, 32.0] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]",
         "raw_details": "E   At index 5 diff: 32.0 != 30.0"},
        {**ann, "path": "tests/webhooks/test_delivery.py", "start_line": 36,
         "title": "tests/webhooks/test_delivery.py::test_delivery_retries_on_503",
         "message": "TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'", "raw_details": ""},
        {**ann, "path": ".github", "start_line": 1, "title": "", "message": "Process completed with exit code 1.",
         "raw_details": ""},
    ]
