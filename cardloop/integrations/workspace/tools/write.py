"""write_file: create a file or replace its whole content."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolRefused, ToolResult, obj
from cardloop.integrations.workspace.tools.paths import confine, relative


class WriteFile:
    name = "write_file"
    description = (
        "Create a file, or replace the whole content of an existing one. Parent directories are "
        "created. To change part of a file, use edit_file."
    )
    input_schema = obj({
        "path": {"type": "string", "description": "Path relative to the repository root."},
        "content": {"type": "string", "description": "The file's complete new content."},
    }, ("path", "content"))
    writes = True

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = confine(ctx.root, args["path"])
        if path.is_dir():
            raise ToolRefused(f"{args['path']} is a directory")
        existed = path.exists()
        blocked = next((p for p in (path.parent, *path.parent.parents) if p.is_file()), None)
        if blocked is not None:  # "README.md/child": a file where a folder would have to go
            raise ToolRefused(f"{relative(ctx.root, blocked)} is a file, not a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = args["content"].encode("utf-8")
        path.write_bytes(data)
        verb = "replaced" if existed else "created"
        return ToolResult(f"{verb} {relative(ctx.root, path)} ({len(data):,} bytes)")
