"""Pull request review threads: the PR's threads, unresolved only when GraphQL says which are
resolved, and reviews' summary bodies (review_comment items)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from github.PullRequestComment import PullRequestComment

from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.integrations.sources.github.client import GitHubClient, Target
from cardloop.integrations.sources.github.common import MAX_SOURCE, MAX_TITLE, GitHubSource, clip
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.logs import Counter

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


class GitHubReviewsSource(GitHubSource):
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
                kind=ContextKind.REVIEW_COMMENT, source=clip(review.html_url or pr.html_url, MAX_SOURCE),
                title=clip(f"{author} reviewed {where}: {verdict}", MAX_TITLE),
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

    def _resolution(self, target: Target, number: int, threads: list[_Thread]) -> str | None:
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
        except UpstreamError as err:
            # Resolution only filters: without it every thread is kept, which beats waiting out
            # a GraphQL rate limit. A failure retrying soon can fix (5xx, timeout) retries.
            if err.retryable and err.retry_after is None:
                raise
            return f"review thread resolution unknown, all threads kept: {err.message}"
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
        return ContextItem(kind=ContextKind.REVIEW_COMMENT, source=clip(root.html_url, MAX_SOURCE),
                           title=clip(f"{_author(root)} on {where}", MAX_TITLE), content="\n".join(parts),
                           created_at=t.comments[-1].created_at)

