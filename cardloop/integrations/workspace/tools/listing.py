"""list_files: the repository's files (tracked and new, .gitignore respected)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolResult, excerpt, obj
from cardloop.integrations.workspace.tools.gitcmd import workspace_files
from cardloop.integrations.workspace.tools.paths import confine, relative

MAX_ENTRIES = 2000


class ListFiles:
    name = "list_files"
    description = (
        "List the repository's files under a directory (default: all), tracked and new, "
        "skipping what .gitignore ignores. Optionally filter by a glob such as '*.py'."
    )
    input_schema = obj({
        "path": {"type": "string", "description": "Directory relative to the repository root (default '.')."},
        "glob": {"type": "string", "description": "Only names matching this glob, e.g. '*.py' or 'tests/*'."},
    })
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        under = relative(ctx.root, confine(ctx.root, args.get("path", ".")))
        files = workspace_files(ctx, under)
        glob = args.get("glob")
        if glob:
            files = [f for f in files if fnmatch.fnmatch(f, glob) or fnmatch.fnmatch(f.rsplit("/", 1)[-1], glob)]
        if not files:
            return ToolResult(f"no files under {under}" + (f" matching {glob!r}" if glob else ""))
        shown = files[:MAX_ENTRIES]
        more = f"\n[... {len(files) - MAX_ENTRIES:,} more files]" if len(files) > MAX_ENTRIES else ""
        return ToolResult(excerpt(f"{len(files)} files\n" + "\n".join(shown) + more, ctx.max_result_chars))
