"""review_comment: the review stage's remark on one line of the branch, posted with the others
as one pull request review when the stage completes (activities/results.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolRefused, ToolResult, obj
from cardloop.integrations.workspace.tools.read import read_text

MAX_BODY = 2_000
# The line comments one review carries (workflows/workspace.py MAX_REVIEW_COMMENTS, the same
# number): a call past them is refused with this, so no remark is dropped unsaid.
MAX_PER_REVIEW = 50
REVIEW_FULL = (f"review comment not noted: this review already holds {MAX_PER_REVIEW} line comments, the most "
               "one review carries. Put any further remarks in your finish summary: it becomes the review's body.")


class ReviewComment:
    name = "review_comment"
    description = ("Leave a review comment on one line of a file as the branch has it (the right side of the "
                   "diff). The comments are posted together as one pull request review when the review completes.")
    input_schema = obj({
        "path": {"type": "string", "description": "Path relative to the repository root."},
        "line": {"type": "integer", "minimum": 1, "description": "Line number in the file on the branch."},
        "body": {"type": "string", "description": "The comment: what is wrong and what to do instead."},
    }, ("path", "line", "body"))
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        rel, text = read_text(ctx, args["path"])
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        line = int(args["line"])
        if line > lines:
            raise ToolRefused(f"{rel} has {lines} lines; line {line} does not exist")
        body = str(args["body"]).strip()
        if not body:
            raise ToolRefused("a review comment needs a body")
        if len(body) > MAX_BODY:
            raise ToolRefused(f"a review comment is at most {MAX_BODY:,} characters; this one has {len(body):,}")
        return ToolResult(f"review comment noted on {rel}:{line} (posted with the review when it completes)")
