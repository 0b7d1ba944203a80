"""read_file: a file's lines with their numbers, all of them or a range."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolRefused, ToolResult, excerpt, obj
from cardloop.integrations.workspace.tools.paths import confine, relative

MAX_FILE_BYTES = 5_000_000


def read_text(ctx: ToolContext, raw: str, *, strict: bool = False) -> tuple[str, str]:
    """(relative path, text) of a workspace file, or ToolRefused. `strict`: refuse a file that is
    not valid UTF-8 (an edit would otherwise write replacement characters over its bytes)."""
    path = confine(ctx.root, raw)
    if not path.is_file():
        raise ToolRefused(f"{raw}: no such file" + (" (it is a directory)" if path.is_dir() else ""))
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ToolRefused(f"{raw}: larger than {MAX_FILE_BYTES:,} bytes; use search to find the lines you need")
    data = path.read_bytes()
    if b"\0" in data[:8000]:
        raise ToolRefused(f"{raw}: a binary file")
    try:
        text = data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError:
        raise ToolRefused(f"{raw}: not valid UTF-8; use write_file to replace it whole") from None
    return relative(ctx.root, path), text


class ReadFile:
    name = "read_file"
    description = (
        "Read a text file of the repository, with line numbers. Give start_line and end_line "
        "(1-based, inclusive) to read part of a long file."
    )
    input_schema = obj({
        "path": {"type": "string", "description": "Path relative to the repository root."},
        "start_line": {"type": "integer", "minimum": 1, "description": "First line to read (default 1)."},
        "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read (default: the end)."},
    }, ("path",))
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        rel, text = read_text(ctx, args["path"])
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        n = len(lines)
        start = args.get("start_line", 1)
        end = min(args.get("end_line", n), n)
        if n and start > n:
            raise ToolRefused(f"{rel} has {n} lines; start_line {start} is past the end")
        if end < start and n:
            raise ToolRefused(f"end_line {end} is before start_line {start}")
        width = len(str(max(end, 1)))
        body = "\n".join(f"{i:>{width}} | {lines[i - 1]}" for i in range(start, end + 1))
        head = f"{rel} (lines {start}-{end} of {n})" if n else f"{rel} (empty file)"
        return ToolResult(excerpt(f"{head}\n{body}", ctx.max_result_chars))
