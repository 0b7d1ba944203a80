"""edit_file: replace one exact, unique piece of a file's text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolRefused, ToolResult, obj
from cardloop.integrations.workspace.tools.paths import confine
from cardloop.integrations.workspace.tools.read import read_text


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


class EditFile:
    name = "edit_file"
    description = (
        "Replace old_text with new_text in a file. old_text must match the file exactly "
        "(whitespace and indentation included) and occur exactly once: include enough surrounding "
        "lines to make it unique. Read the file first."
    )
    input_schema = obj({
        "path": {"type": "string", "description": "Path relative to the repository root."},
        "old_text": {"type": "string", "description": "The exact text to replace (must be unique in the file)."},
        "new_text": {"type": "string", "description": "The replacement text."},
    }, ("path", "old_text", "new_text"))
    writes = True

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        rel, text = read_text(ctx, args["path"], strict=True)
        old, new = args["old_text"], args["new_text"]
        if not old:
            raise ToolRefused("old_text is empty: use write_file to create or replace a whole file")
        count = text.count(old)
        if count == 0:
            hint = ""
            first = old.strip().splitlines()[0].strip() if old.strip() else ""
            if first and first in text:
                hint = (f" (its first line occurs at line {_line_of(text, text.index(first))}: check "
                        "whitespace and the lines after it)")
            raise ToolRefused(f"old_text not found in {rel}{hint}; nothing was changed")
        if count > 1:
            lines, start = [], 0
            while (at := text.find(old, start)) != -1 and len(lines) < 10:
                lines.append(str(_line_of(text, at)))
                start = at + 1
            raise ToolRefused(f"old_text occurs {count} times in {rel} (at lines {', '.join(lines)}): include "
                              "more surrounding lines so that it occurs once; nothing was changed")
        at = text.index(old)
        confine(ctx.root, args["path"]).write_text(text.replace(old, new, 1), encoding="utf-8")
        line = _line_of(text, at)
        return ToolResult(f"edited {rel} at line {line}: {old.count(chr(10)) + 1} line(s) replaced by "
                          f"{new.count(chr(10)) + 1}")
