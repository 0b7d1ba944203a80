"""The review stage's line comments as one pull request review on GitHub, posted once.

    post_review(prs, "acme/api", "card/PAY-1", body=..., comments=[ReviewComment(...)], marker=...)

The review goes on the open pull request whose head is the card's branch (none open: skipped,
with the reason). A review already carrying the hidden marker is returned instead of posting a
second one. GitHub refuses a line comment outside the pull request's diff with a 422: the
review is then posted with every comment in its body ("`path:line`: text"), so nothing the
reviewer said is lost.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from github.GithubException import GithubException

from cardloop.integrations.github_results import PullRequests, has_marker, marker_line, with_marker

MAX_COMMENTS = 50
MAX_REVIEWS_READ = 300


@dataclass(frozen=True)
class ReviewComment:
    path: str
    line: int
    body: str


@dataclass(frozen=True)
class ReviewOutcome:
    review_id: int = 0
    url: str = ""
    created: bool = False
    inline: int = 0          # comments posted on their lines
    in_body: int = 0         # comments moved into the review's body
    skipped: str = ""


def _listed(comments: list[ReviewComment]) -> str:
    return "\n".join(f"- `{c.path}:{c.line}`: {c.body}" for c in comments)


def post_review(prs: PullRequests, repo: str, branch: str, *, body: str, comments: list[ReviewComment],
                marker: str) -> ReviewOutcome:
    """Raises UpstreamError when GitHub cannot be read or written; ValueError on bad input."""
    if not comments and not body.strip():
        raise ValueError("a review needs a body or comments")
    for c in comments:
        if not c.path or c.line < 1 or not c.body.strip():
            raise ValueError(f"not a review comment: {c!r}")
    owner = repo.split("/")[0]
    mark = marker_line(marker)
    inline, extra = comments[:MAX_COMMENTS], comments[MAX_COMMENTS:]
    with prs._calling(f"looking for the open pull request from {branch} in {repo}"):
        gh_repo = prs.gh.get_repo(repo)
        pr = next(iter(gh_repo.get_pulls(state="open", head=f"{owner}:{branch}")), None)
    if pr is None:
        return ReviewOutcome(skipped=f"no open pull request from {branch} in {repo}")
    with prs._calling(f"reading the reviews of {repo}#{pr.number}"):
        found = next((r for r in itertools.islice(pr.get_reviews(), MAX_REVIEWS_READ) if has_marker(r.body, mark)),
                     None)
    if found is not None:
        return ReviewOutcome(review_id=found.id, url=found.html_url or "", created=False)
    text = body.strip() + (f"\n\n{_listed(extra)}" if extra else "")
    payload = [{"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body} for c in inline]
    with prs._calling(f"posting a review on {repo}#{pr.number}"):
        try:
            made = pr.create_review(body=with_marker(text, mark), event="COMMENT", comments=payload)  # type: ignore[arg-type]
            return ReviewOutcome(made.id, made.html_url or "", True, len(inline), len(extra))
        except GithubException as exc:
            if exc.status != 422 or not inline:
                raise
    # A line outside the diff: every comment goes into the body instead.
    text = body.strip() + f"\n\n{_listed(comments)}"
    with prs._calling(f"posting a review on {repo}#{pr.number} (its lines in the body)"):
        made = pr.create_review(body=with_marker(text, mark), event="COMMENT")
    return ReviewOutcome(made.id, made.html_url or "", True, 0, len(comments))
