"""search: a regular expression over the repository's files, with paths and line numbers."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolRefused, ToolResult, excerpt, obj
from cardloop.integrations.workspace.tools.gitcmd import workspace_files
from cardloop.integrations.workspace.tools.paths import confine, relative

MAX_MATCHES = 300
MAX_FILE_BYTES = 2_000_000
MAX_LINE_CHARS = 300


class Search:
    name = "search"
    description = (
        "Search the repository's files for a regular expression (Python syntax), tracked and new "
        "files, .gitignore respected. Answers path:line: text for each matching line."
    )
    input_schema = obj({
        "pattern": {"type": "string", "description": "Regular expression, e.g. 'def delay_for'."},
        "path": {"type": "string", "description": "Directory or file to search (default: the whole repository)."},
        "glob": {"type": "string", "description": "Only files whose name matches this glob, e.g. '*.py'."},
        "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
    }, ("pattern",))
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        try:
            regex = re.compile(args["pattern"], re.IGNORECASE if args.get("ignore_case") else 0)
        except re.error as exc:
            raise ToolRefused(f"invalid regular expression: {exc}") from None
        under = relative(ctx.root, confine(ctx.root, args.get("path", ".")))
        glob = args.get("glob")
        matches: list[str] = []
        total = 0
        for rel in workspace_files(ctx, under):
            if glob and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(rel.rsplit("/", 1)[-1], glob)):
                continue
            try:
                path = confine(ctx.root, rel)  # a tracked symlink may point anywhere
                if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                    continue
                data = path.read_bytes()
            except (ToolRefused, OSError):
                continue
            if b"\0" in data[:8000]:
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
                if regex.search(line):
                    total += 1
                    if len(matches) < MAX_MATCHES:
                        text = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"
                        matches.append(f"{rel}:{number}: {text}")
        if not matches:
            return ToolResult(f"no matches for {args['pattern']!r} under {under}")
        more = f"\n[... {total - MAX_MATCHES:,} more matches]" if total > MAX_MATCHES else ""
        return ToolResult(excerpt(f"{total} matches\n" + "\n".join(matches) + more, ctx.max_result_chars))
