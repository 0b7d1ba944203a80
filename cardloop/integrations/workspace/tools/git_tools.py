"""git_diff and git_status: what the agent changed so far (uncommitted, against HEAD)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolResult, excerpt, obj
from cardloop.integrations.workspace.tools.gitcmd import run_git
from cardloop.integrations.workspace.tools.paths import confine, relative


class GitDiff:
    name = "git_diff"
    description = ("Show the uncommitted changes against the last commit (unified diff), optionally for one "
                   "path; new files are listed after the diff.")
    input_schema = obj({"path": {"type": "string", "description": "Limit the diff to this file or directory."}})
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        under = relative(ctx.root, confine(ctx.root, args.get("path", ".")))
        diff = run_git(ctx, "diff", "--no-ext-diff", "--no-textconv", "HEAD", "--", under)
        new = run_git(ctx, "ls-files", "--others", "--exclude-standard", "--", under).split()
        text = diff.rstrip()
        if new:
            text += ("\n\n" if text else "") + "new files (not in the diff):\n" + "\n".join(new)
        return ToolResult(excerpt(text or "no changes", ctx.max_result_chars))


class GitStatus:
    name = "git_status"
    description = "Show the branch and which files are modified, added, deleted or new (git status --short)."
    input_schema = obj({})
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        out = run_git(ctx, "status", "--short", "--branch", "--untracked-files=all")
        return ToolResult(excerpt(out.rstrip() or "clean", ctx.max_result_chars))
