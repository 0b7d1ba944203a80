"""A card's work on GitHub: its pull request and its comments, safe to repeat.

    PullRequests.ensure     the open pull request from the card's branch, updated; else a new one
    PullRequests.comment    one comment per marker on an issue or pull request: posted, then edited
    PullRequests.review     one review per marker on a pull request: line comments, posted once
    pull_request_body       the pull request's text: the card, the plan, what changed, the checks

The activity around these calls is retried (a timeout after GitHub already acted, a worker
crash), so every call finds what an earlier attempt made before it makes anything: a pull
request by its head branch (GitHub keeps one open PR per head and base), a comment or a review
by a hidden marker line `<!-- cardloop:{marker} -->` that cardloop appends to what it writes,
and only among those cardloop's own account wrote (the token's login, GET /user, or the `login`
given: a person's comment that carries a marker is never edited, nor taken for ours). Text
that looks like a marker inside what is written (a model's reply, the card's text) is defused
("cardloop (quoted):"), so no later run can mistake it for its own. A
create that loses a race (GitHub's 422 "A pull request already exists") finds the winner and
updates it. cardloop owns what it writes: an update replaces the title and body, including a
person's edits to them. A review is never edited: the one carrying the marker is the answer.

A review's line comments must sit on lines the pull request's diff shows (else GitHub's 422
"Pull request review thread line must be part of the diff" / "Path could not be resolved",
which does not say which comment). The review is then posted again with the comments the diff
does not show (read from the pull request's files) written into its body as "`path:line`:
text", so nothing the agent said is lost; past MAX_REVIEW_COMMENTS, comments go there too.

Failures leave as UpstreamError (GitHub's status and message, never a credential; 401/403/404
and 422 final, 429/5xx/network retryable with the wait GitHub asked for). Arguments that can
never work (a repository not "owner/name", an empty branch, title or marker, a review comment
without a path, line or text) raise ValueError before anything is sent: a programming error,
which the activity reports as invalid input.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import github
import requests
from github.File import File
from github.GithubException import BadAttributeException, GithubException
from github.NamedUser import NamedUser
from github.PullRequest import PullRequest
from github.PullRequestReview import PullRequestReview
from github.Repository import Repository

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.board_clients.base import defuse_markers
from cardloop.integrations.github_log import quiet_pygithub
from cardloop.integrations.sources.github.errors import rate_limit_wait
from cardloop.integrations.upstream import UpstreamError, clamp_wait, retry_after_header

quiet_pygithub()  # PyGithub's import set its logger to INFO, with a stderr handler (github_log.py)

USER_AGENT = "cardloop"
MAX_BODY = 65_536  # GitHub refuses a longer pull request body or comment (422)
MAX_TITLE = 256
MAX_MARKER = 600  # room for a card key ("tenant/board/card id", the id up to 200) and a suffix
PR_BODY_BUDGET = 20_000  # pull_request_body's whole text: readable, far under MAX_BODY
MAX_REVIEW_COMMENTS = 50  # line comments on one review; the rest go into its body

_REPO = re.compile(r"([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)")
# An issue or pull request on GitHub (github.com or an Enterprise host): where a comment can go.
_GITHUB_THREAD = re.compile(r"^https://[^/\s]+/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/(?:issues|pull)/([0-9]{1,9})(?:[/?#].*)?\Z")
# Card keys' characters ("%" from an escaped ":"); no ">" or "!", so nothing can end the comment early.
_MARKER = re.compile(r"[A-Za-z0-9_.:/#@+=%-]+")
# A branch name git accepts (check-ref-format, the parts GitHub callers trip on) without ":".
_BRANCH_BAD = re.compile(r"[\s:~^?*\[\\\x00-\x1f\x7f]|\.\.|@\{|//|^[/.-]|[/.]\Z|\.lock\Z")
_MARKER_LIKE = re.compile(r"<!--(\s*)cardloop:", re.IGNORECASE)


@dataclass(frozen=True)
class PullRequestResult:
    number: int
    url: str  # html_url
    created: bool  # False: an existing PR for the head branch was found and updated


@dataclass(frozen=True)
class ReviewComment:
    """A comment on one line of a file as the pull request's head has it (the diff's RIGHT side)."""

    path: str  # relative to the repository's root, "app/webhooks/retry.py"
    line: int  # 1-based
    body: str


@dataclass(frozen=True)
class ReviewResult:
    review_id: int
    url: str  # html_url: https://github.com/owner/name/pull/N#pullrequestreview-ID
    created: bool  # False: a review carrying the marker was already there; nothing was posted
    comments: int  # line comments on the review
    moved_to_body: int = 0  # comments written into the review's body: past the cap, or outside the diff


class PullRequests:
    """Writes pull requests, comments and reviews through PyGithub, retries off (Temporal owns them).

    `api_url`: https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise Server.
    `token`: a token that may write pull requests and issues (contents read for a cross-branch
    PR); None or empty builds the client, and every call then fails as not_configured.
    `request_interval` / `write_interval` space calls as GitHub asks integrations to (at least
    a second between writes); tests pass None.
    """

    def __init__(
        self,
        api_url: str,
        token: Secret | str | None,
        *,
        timeout: float = 30.0,
        request_interval: float | None = 0.25,
        write_interval: float | None = 1.0,
        verify: bool | str = True,
        login: str = "",
    ) -> None:
        self.api_url = api_url.rstrip("/")
        # Whose comments and reviews are cardloop's: `login` ([boards.github] write_actor), else
        # the token's user, read once; an installation token cannot read it (403): then bots'.
        self._login = login.strip()
        self._bots_only = False
        self.timeout = timeout
        self._token = reveal(token)
        self.gh = github.Github(
            base_url=self.api_url,
            auth=github.Auth.Token(self._token) if self._token else None,
            timeout=max(1, math.ceil(timeout)),  # PyGithub insists on an int
            retry=None,  # Temporal retries the activity
            user_agent=USER_AGENT,
            per_page=100,
            verify=verify,
            seconds_between_requests=request_interval,
            seconds_between_writes=write_interval,
            lazy=True,  # a repository or issue is a URL until an attribute is read: no extra GETs
        )

    def close(self) -> None:
        self.gh.close()

    def __enter__(self) -> PullRequests:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- pull requests ------------------------------------------------------------------------

    def ensure(self, repo: str, *, head: str, base: str | None, title: str, body: str,
               marker: str) -> PullRequestResult:
        """Find an open PR whose head is `head` ("branch" or "owner:branch"; owner defaults to
        the repository's) and update its title and body; else open one against `base` (None:
        the repository's default branch). `body` carries the marker once. Idempotent."""
        full, owner = repo_name(repo)
        head_owner, branch = _head(head, owner)
        label = f"{head_owner}:{branch}"
        if base is not None:
            _branch(base, "base")
            if head_owner.lower() == owner.lower() and base == branch:
                raise ValueError(f"head and base are the same branch ({branch!r})")
        title = _title(title)
        mark = marker_line(marker)
        text = with_marker(body, mark)
        self._require_token()
        gh_repo = self.gh.get_repo(full)
        finding = f"looking for an open pull request from {label} in {full}"

        with self._calling(finding):
            pr = self._find(gh_repo, label, base, mark)
        if pr is not None:
            return self._update(pr, full, title, text)

        if base is None:
            with self._calling(f"reading the default branch of {full}"):
                base = gh_repo.default_branch
            if not isinstance(base, str) or not base:
                raise UpstreamError(f"GitHub named no default branch for {full}", kind="bad_response",
                                    retryable=True)
        # The plain branch name is GitHub's documented form for a same-repository head.
        head_param = branch if head_owner.lower() == owner.lower() else label
        made: PullRequest | None = None
        with self._calling(f"opening a pull request from {label} into {base} of {full}"):
            try:
                made = gh_repo.create_pull(base=base, head=head_param, title=title, body=text)
            except GithubException as exc:
                if exc.status != 422 or not _already_exists(exc.data):
                    raise
        if made is not None:
            return PullRequestResult(number=made.number, url=made.html_url, created=True)

        # Another attempt (or a person) opened it between our look and our create.
        with self._calling(finding):
            pr = self._find(gh_repo, label, base, mark)
        if pr is None:
            raise UpstreamError(f"GitHub says a pull request from {label} into {base} of {full} already exists, "
                                "but none is listed as open yet", kind="conflict", retryable=True, status=422)
        return self._update(pr, full, title, text)

    def _find(self, gh_repo: Repository, label: str, base: str | None, mark: str) -> PullRequest | None:
        owner, _, branch = label.partition(":")
        found = [pr for pr in gh_repo.get_pulls(state="open", head=label)
                 if _same_label(pr.head.label, owner, branch)]  # also guards against an ignored filter
        if not found:
            return None
        # GitHub allows one open PR per head *and base*: prefer ours, then the base asked for.
        found.sort(key=lambda pr: (not has_marker(pr.body, mark), base is not None and pr.base.ref != base,
                                   pr.number))
        return found[0]

    def _update(self, pr: PullRequest, full: str, title: str, text: str) -> PullRequestResult:
        number, url = pr.number, pr.html_url
        if pr.title != title or (pr.body or "") != text:  # unchanged: no write, no "edited" event
            with self._calling(f"updating pull request {full}#{number}"):
                pr.edit(title=title, body=text)
        return PullRequestResult(number=number, url=url, created=False)

    # -- comments -----------------------------------------------------------------------------

    def open_pull(self, repo: str, head: str) -> int | None:
        """The number of the open pull request whose head is `head` ("branch" or "owner:branch"),
        or None: where a review of the branch goes."""
        full, owner = repo_name(repo)
        head_owner, branch = _head(head, owner)
        self._require_token()
        label = f"{head_owner}:{branch}"
        gh_repo = self.gh.get_repo(full)
        with self._calling(f"looking for the open pull request from {label} in {full}"):
            pr = self._find(gh_repo, label, None, "")
        return pr.number if pr is not None else None

    def comment(self, repo: str, number: int, *, body: str, marker: str) -> int:
        """A comment on issue or pull request `number` carrying the marker: the one already
        there is edited (the first, reading every page), else one is posted. Its id."""
        full, _ = repo_name(repo)
        _number(number)
        mark = marker_line(marker)
        text = with_marker(body, mark)
        self._require_token()
        issue = self.gh.get_repo(full).get_issue(number)  # lazy: no GET of the issue itself

        with self._calling(f"reading the comments on {full}#{number}"):
            existing = next((c for c in issue.get_comments() if has_marker(c.body, mark) and self._ours(c.user)),
                            None)
        if existing is not None:
            cid = existing.id
            if existing.body != text:
                with self._calling(f"updating comment {cid} on {full}#{number}"):
                    existing.edit(text)
            return int(cid)
        with self._calling(f"commenting on {full}#{number}"):
            made = issue.create_comment(text)
            return int(made.id)

    # -- reviews ------------------------------------------------------------------------------

    def review(self, repo: str, number: int, *, body: str, comments: Sequence[ReviewComment],
               marker: str) -> ReviewResult:
        """One review (event COMMENT) on pull request `number`: `body`, and each comment on its
        line of the head commit. A review already carrying the marker (every page read) is
        returned as it is, created False: a marker names one review, so a new round of comments
        needs a new marker. Comments past MAX_REVIEW_COMMENTS, and, when GitHub refuses lines
        outside the diff, the comments the diff does not show, are written into the body.

        ValueError before any call: a repository not "owner/name", a number < 1, a bad marker,
        a body that is not text, a comment that is not a ReviewComment, has an empty path (or
        one with a line break), a line < 1 or no text, or neither a body nor comments.
        """
        full, _ = repo_name(repo)
        _number(number)
        mark = marker_line(marker)
        if not isinstance(body, str):
            raise ValueError(f"body must be text, not {type(body).__name__}")
        items = _review_comments(comments)
        if not body.strip() and not items:
            raise ValueError("a review needs a body or comments")
        self._require_token()
        pr = self.gh.get_repo(full).get_pull(number)  # lazy: a URL until an attribute is read
        where = f"{full}#{number}"

        with self._calling(f"reading the reviews on {where}"):
            found = next((r for r in pr.get_reviews() if has_marker(r.body, mark) and self._ours(r.user)), None)
        if found is not None:
            return self._found_review(pr, found, where)
        with self._calling(f"reading pull request {where}"):
            head_sha = pr.head.sha

        first = inline = list(range(min(len(items), MAX_REVIEW_COMMENTS)))
        made = self._post_review(pr, where, head_sha, body, items, inline, mark, tolerate_diff=bool(inline))
        if made is None:
            # Some line is not in the diff, and GitHub does not say which: the diff does.
            with self._calling(f"listing the files of {where}"):
                shown = diff_lines(pr.get_files())
            inline = [i for i, c in enumerate(items) if c.line in shown.get(c.path, ())][:MAX_REVIEW_COMMENTS]
            if inline and inline != first:
                made = self._post_review(pr, where, head_sha, body, items, inline, mark, tolerate_diff=True)
            if made is None:  # the diff moved on, or GitHub reads it otherwise: every comment in the body
                inline = []
                made = self._post_review(pr, where, head_sha, body, items, inline, mark, tolerate_diff=False)
        assert made is not None
        return ReviewResult(review_id=made[0], url=made[1], created=True, comments=len(inline),
                            moved_to_body=len(items) - len(inline))

    def _post_review(self, pr: PullRequest, where: str, head_sha: str, body: str, items: list[ReviewComment],
                     inline: list[int], mark: str, *, tolerate_diff: bool) -> tuple[int, str] | None:
        """POST the review with items[i] for i in `inline` on their lines, the others in the
        body: (id, html_url). None when GitHub refused a line outside the diff and
        `tolerate_diff` (the caller tries again with fewer line comments)."""
        on_lines = set(inline)
        moved = [c for i, c in enumerate(items) if i not in on_lines]
        payload = {
            "commit_id": head_sha,
            "body": with_marker(review_body(body, moved), mark),
            "event": "COMMENT",
            "comments": [{"path": items[i].path, "line": items[i].line, "side": "RIGHT",
                          "body": _clip_body(items[i].body)} for i in inline],
        }
        doing = f"posting a review with {len(inline)} line comment(s) on {where}"
        with self._calling(doing):
            try:
                _, data = self.gh.requester.requestJsonAndCheck("POST", f"{pr.url}/reviews", input=payload)
            except GithubException as exc:
                if tolerate_diff and exc.status == 422 and _outside_diff(exc.data):
                    return None
                raise
        rid = data.get("id") if isinstance(data, dict) else None
        if isinstance(rid, bool) or not isinstance(rid, int):
            # Posted, most likely: the activity's retry finds it by its marker.
            raise UpstreamError(f"GitHub answered in an unexpected shape while {doing}", kind="bad_response",
                                retryable=True)
        return rid, str(data.get("html_url") or "")

    def _found_review(self, pr: PullRequest, found: PullRequestReview, where: str) -> ReviewResult:
        rid = int(found.id)
        with self._calling(f"reading the comments of review {rid} on {where}"):
            on_lines = sum(1 for _ in pr.get_single_review_comments(rid))
        return ReviewResult(review_id=rid, url=found.html_url or "", created=False, comments=on_lines,
                            moved_to_body=moved_in_body(found.body))

    # -- whose is it -------------------------------------------------------------------------

    def _me(self) -> str:
        """cardloop's login on GitHub ("" when the token cannot say: an installation token)."""
        if not self._login and not self._bots_only:
            with self._calling("reading whose token this is"):
                try:
                    self._login = str(self.gh.get_user().login or "")
                except GithubException as exc:
                    if exc.status != 403:
                        raise
                    self._bots_only = True  # "Resource not accessible by integration": a GitHub App
        return self._login

    def _ours(self, user: NamedUser | None) -> bool:
        """A comment or review by cardloop's account: only those are found by their marker."""
        if user is None:
            return False
        me = self._me()
        if me:
            return (user.login or "").lower() == me.lower()
        return user.type == "Bot"

    # -- errors -------------------------------------------------------------------------------

    def _require_token(self) -> None:
        if not self._token:
            raise UpstreamError("no GitHub token to write pull requests and comments with", kind="not_configured",
                                retryable=False)

    @contextmanager
    def _calling(self, doing: str) -> Iterator[None]:
        """Whatever a GitHub call raises, as an UpstreamError saying what was being done."""
        try:
            yield
        except UpstreamError:
            raise
        except GithubException as exc:
            raise self._scrubbed(classify(exc.status, exc.headers, exc.data, doing)) from None
        except requests.Timeout:
            raise UpstreamError(f"GitHub ({self._host()}) timed out while {doing} (timeout {self.timeout:g} s)",
                                kind="timeout", retryable=True) from None
        except requests.ConnectionError as exc:
            raise UpstreamError(f"cannot reach GitHub ({self._host()}) while {doing}: {type(exc).__name__}",
                                kind="connection", retryable=True) from None
        except requests.RequestException as exc:
            raise UpstreamError(f"GitHub request failed while {doing}: {type(exc).__name__}",
                                kind="unavailable", retryable=True) from None
        except BadAttributeException as exc:
            # A 2xx whose JSON is not GitHub's shape (a proxy's page, a truncated answer).
            raise UpstreamError(f"GitHub answered in an unexpected shape while {doing}: {type(exc).__name__}",
                                kind="bad_response", retryable=True) from None

    def _scrubbed(self, err: UpstreamError) -> UpstreamError:
        # GitHub never echoes a credential, but a proxy in between might: never pass it on.
        if self._token and self._token in err.message:
            return UpstreamError(err.message.replace(self._token, "***"), kind=err.kind, retryable=err.retryable,
                                 status=err.status, retry_after=err.retry_after)
        return err

    def _host(self) -> str:
        return urllib.parse.urlsplit(self.api_url).netloc


def classify(status: int | None, headers: Any, data: Any, doing: str) -> UpstreamError:
    """GitHub's error answer to a write: rate limits (403/429) and 5xx retry, after the wait
    GitHub asked for; 401/403/404/410/422 and other 4xx are final, with GitHub's message."""
    status = int(status or 0)
    hdrs = dict(headers or {})
    message = _message(data)
    detail = f"HTTP {status}" + (f": {message}" if message else "")
    wait = rate_limit_wait(status, hdrs, message)
    if wait is not None:
        return UpstreamError(f"GitHub rate limit reached while {doing} ({detail}); it asks to wait {wait:.0f} s",
                             kind="rate_limited", retryable=True, status=status, retry_after=wait)

    def final(kind: str, text: str) -> UpstreamError:
        return UpstreamError(text, kind=kind, retryable=False, status=status)

    if status == 401:
        return final("auth", f"GitHub rejected the token while {doing} ({detail})")
    if status == 403:
        return final("auth", f"GitHub refused while {doing} ({detail}): the token needs pull requests and "
                             "issues: write, and the repository must not be archived")
    if status in (404, 410):
        return final("not_found", f"not found while {doing} ({detail}): it does not exist or this token "
                                  "cannot see it")
    if status == 413:
        return final("too_large", f"GitHub refused the size while {doing} ({detail})")
    if status in (408, 409) or status >= 500:
        kind = {408: "timeout", 409: "conflict"}.get(status, "server")
        asked = clamp_wait(retry_after_header(hdrs), floor=0.0)
        return UpstreamError(f"GitHub failed while {doing} ({detail})", kind=kind, retryable=True, status=status,
                             retry_after=asked)
    return final("invalid_request", f"GitHub refused the request while {doing} ({detail})")


def _message(data: Any) -> str:
    """GitHub's message and, for a 422, what each validation error says."""
    if not isinstance(data, dict):
        return ""
    parts = [data["message"]] if isinstance(data.get("message"), str) else []
    errors = data.get("errors")
    for err in errors if isinstance(errors, list) else []:
        if isinstance(err, dict):
            text = err.get("message") or " ".join(str(err[k]) for k in ("resource", "field", "code") if err.get(k))
            parts.append(str(text))
        elif isinstance(err, str):
            parts.append(err)
    return "; ".join(p for p in parts if p)[:500]


def _already_exists(data: Any) -> bool:
    return "already exists" in _message(data).lower()


# -- markers and arguments -----------------------------------------------------------------


def thread_of(url: str | None) -> tuple[str, int] | None:
    """(owner/name, number) of a GitHub issue or pull request URL, else None."""
    match = _GITHUB_THREAD.match(url or "")
    return (match.group(1), int(match.group(2))) if match else None


def marker_line(marker: str) -> str:
    """The hidden line that names what cardloop wrote: `<!-- cardloop:{marker} -->`."""
    if not isinstance(marker, str) or not _MARKER.fullmatch(marker) or len(marker) > MAX_MARKER:
        raise ValueError(f"a marker is 1-{MAX_MARKER} characters of letters, digits and _.:/#@+=%-: {marker!r}")
    return f"<!-- cardloop:{marker} -->"


def has_marker(body: str | None, mark: str) -> bool:
    """The marker on a line of its own: a quoted reply ("> <!-- … -->") is not ours."""
    return body is not None and any(line.strip() == mark for line in body.splitlines())


def with_marker(body: str, mark: str) -> str:
    """`body` ending in the marker exactly once, within GitHub's limit; any other text in it
    that looks like a marker (a model's reply quoting one) defused."""
    if not isinstance(body, str):
        raise ValueError(f"body must be text, not {type(body).__name__}")
    kept = _defuse(defuse_markers("\n".join(line for line in body.splitlines() if line.strip() != mark))).rstrip()
    room = MAX_BODY - len(mark) - 2
    if len(kept) > room:
        note = "\n\n[… cut to fit GitHub's limit …]"
        kept = kept[: room - len(note)].rstrip() + note
    return f"{kept}\n\n{mark}" if kept else mark


def repo_name(repo: str) -> tuple[str, str]:
    """("owner/name", "owner"), or ValueError for anything else."""
    m = _REPO.fullmatch(repo) if isinstance(repo, str) else None
    if m is None or m.group(2) in (".", "..") or m.group(1) in (".", ".."):
        raise ValueError(f"a repository is 'owner/name': {repo!r}")
    return repo, m.group(1)


def _number(number: int) -> int:
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"not an issue or pull request number: {number!r}")
    return number


def _branch(name: str, what: str) -> str:
    if not isinstance(name, str) or not name or _BRANCH_BAD.search(name):
        raise ValueError(f"{what} is not a branch name: {name!r}")
    return name


def _head(head: str, owner: str) -> tuple[str, str]:
    if not isinstance(head, str) or not head:
        raise ValueError("head is empty: name the branch (or owner:branch) the pull request comes from")
    head_owner, sep, branch = head.partition(":")
    if not sep:
        head_owner, branch = owner, head
    elif not _REPO.fullmatch(f"{head_owner}/x"):
        raise ValueError(f"head is 'branch' or 'owner:branch': {head!r}")
    return head_owner, _branch(branch, "head")


def _same_label(label: str | None, owner: str, branch: str) -> bool:
    got_owner, _, got_branch = (label or "").partition(":")
    return got_owner.lower() == owner.lower() and got_branch == branch


def _title(title: str) -> str:
    text = " ".join(title.split()) if isinstance(title, str) else ""
    if not text:
        raise ValueError("a pull request needs a title")
    return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"


# -- reviews ---------------------------------------------------------------------------------

MOVED_HEADING = "**Comments on lines outside this pull request's diff**"
_HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def _review_comments(comments: Sequence[ReviewComment]) -> list[ReviewComment]:
    if isinstance(comments, str | bytes) or not isinstance(comments, Sequence):
        raise ValueError(f"comments must be a list of ReviewComment, not {type(comments).__name__}")
    for n, c in enumerate(comments):
        if not isinstance(c, ReviewComment):
            raise ValueError(f"comment {n} is not a ReviewComment: {type(c).__name__}")
        if not isinstance(c.path, str) or not c.path.strip() or any(ch in c.path for ch in "\r\n\x00"):
            raise ValueError(f"comment {n}: a path is the file's path in the repository: {c.path!r}")
        if isinstance(c.line, bool) or not isinstance(c.line, int) or c.line < 1:
            raise ValueError(f"comment {n} on {c.path}: a line is a number from 1: {c.line!r}")
        if not isinstance(c.body, str) or not c.body.strip():
            raise ValueError(f"comment {n} on {c.path}:{c.line} says nothing")
    return list(comments)


def review_body(body: str, moved: Sequence[ReviewComment]) -> str:
    """A review's text: `body`, then each moved comment as "- `path:line`: text"."""
    text = body.strip()
    if not moved:
        return text
    section = MOVED_HEADING + "\n\n" + "\n".join(_listed(c) for c in moved)
    return f"{text}\n\n{section}" if text else section


def _listed(c: ReviewComment) -> str:
    first, *rest = c.body.strip().splitlines()
    # Later lines indented under the item: a code block or a second paragraph stays in it.
    more = [f"  {line}" if line.strip() else "" for line in rest]
    return "\n".join([f"- {_code(f'{c.path}:{c.line}')}: {first}", *more])


def _code(text: str) -> str:
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def moved_in_body(body: str | None) -> int:
    """How many comments a review's body lists under MOVED_HEADING (its last one)."""
    lines = (body or "").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == MOVED_HEADING]
    return sum(1 for line in lines[starts[-1] + 1:] if line.startswith("- `")) if starts else 0


def diff_lines(files: Iterable[File]) -> dict[str, set[int]]:
    """Per path, the head-side lines a pull request's diff shows (added and context lines):
    the lines a review comment may name. A file without a patch (binary, too large) has none."""
    return {f.filename: patch_lines(f.patch) for f in files}


def patch_lines(patch: str | None) -> set[int]:
    """The RIGHT-side line numbers in a unified diff's hunks."""
    lines: set[int] = set()
    right: int | None = None
    for raw in (patch or "").rstrip("\n").split("\n"):
        m = _HUNK.match(raw)
        if m:
            right = int(m.group(1))
        elif right is not None and not raw.startswith(("-", "\\")):
            lines.add(right)  # "+" added or " " context (an empty line is context that lost its space)
            right += 1
    return lines


def _outside_diff(data: Any) -> bool:
    text = _message(data).lower()
    return any(s in text for s in ("part of the diff", "could not be resolved", "diff hunk can't be blank"))


def _clip_body(text: str) -> str:
    if len(text) <= MAX_BODY:
        return text
    note = "\n\n[… cut to fit GitHub's limit …]"
    return text[: MAX_BODY - len(note)].rstrip() + note


# -- the pull request's text ---------------------------------------------------------------

_SECTIONS = ("Plan", "What changed", "How it was verified")
_FOOTER = ("<sub>Opened by cardloop for this card; cardloop rewrites this description whenever it updates "
           "the pull request.</sub>")


def pull_request_body(plan: str, summary: str, verification: str, card_title: str, card_url: str | None) -> str:
    """A pull request description: the card, the plan, what changed, how it was verified.

    At most PR_BODY_BUDGET characters: short sections are kept whole and the long ones share
    what is left, each cut in the middle (its start and its end say the most: a plan's goal, a
    test run's result). Text that looks like cardloop's hidden marker is defused so it can
    never be mistaken for one.
    """
    title = _clip_end(" ".join((card_title or "").split()), 300) or "(untitled card)"
    url = (card_url or "").strip()
    card = f"## Card\n\n**{_defuse(title)}**"
    if re.fullmatch(r"https?://\S+", url) and len(url) <= 2000:
        card += f"\n\n{url}"
    texts = [_defuse((t or "").strip()) for t in (plan, summary, verification)]
    overhead = len(card) + len(_FOOTER) + sum(len(f"\n\n## {h}\n\n") for h in _SECTIONS) + 2
    # Each cut adds a note and may close a code fence: keep room for that.
    shares = _share([len(t) for t in texts], PR_BODY_BUDGET - overhead - 3 * 80)
    parts = [card]
    for heading, text, share in zip(_SECTIONS, texts, shares, strict=True):
        parts.append(f"## {heading}\n\n{_clip_middle(text, share) if text else '_Nothing recorded._'}")
    parts.append(_FOOTER)
    return "\n\n".join(parts)


def _share(lengths: list[int], budget: int) -> list[int]:
    """Water-filling: sections shorter than an equal share keep all; the rest split the remainder."""
    budget = max(budget, 0)
    shares = [0] * len(lengths)
    open_ = sorted(range(len(lengths)), key=lambda i: lengths[i])
    while open_:
        each = budget // len(open_)
        i = open_[0]
        if lengths[i] <= each:
            shares[i] = lengths[i]
            budget -= lengths[i]
            open_.pop(0)
        else:
            for j in open_:
                shares[j] = each
            break
    return shares


def _clip_end(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = max(limit, 0)
    head = text[: keep * 2 // 3]
    tail = text[len(text) - keep // 3:] if keep // 3 else ""
    if "\n" in head[len(head) // 2:]:  # end and start on line breaks when one is near
        head = head[: head.rfind("\n")]
    if "\n" in tail[: len(tail) // 2]:
        tail = tail[tail.find("\n") + 1:]
    cut = len(text) - len(head) - len(tail)
    # A cut inside a code block would swallow everything after it: close and reopen the fence.
    if _fences(head) % 2:
        head += "\n```"
    if _fences(tail) % 2:
        tail = "```\n" + tail
    return f"{head.rstrip()}\n\n[… {cut} characters cut …]\n\n{tail.lstrip()}"


def _fences(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("```"))


def _defuse(text: str) -> str:
    return _MARKER_LIKE.sub(r"<!--\1cardloop (quoted):", text)
