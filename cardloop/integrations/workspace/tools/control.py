"""finish and block: the model ends the stage explicitly (the <promise> tags keep working)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolResult, obj


class Finish:
    name = "finish"
    description = ("Say the stage's work is complete, with a summary of what changed and how it was verified. "
                   "In coding, testing and error fixing the repository's tests are run before it is accepted.")
    input_schema = obj({"summary": {"type": "string", "description": "What was done and how it was verified."}},
                       ("summary",))
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult(f"finish requested: {args['summary']}", control="finish")


class Block:
    name = "block"
    description = "Stop because the work cannot go on without a person (missing access, a decision, unclear scope)."
    input_schema = obj({"reason": {"type": "string", "description": "What is needed and from whom."}},
                       ("reason",))
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult(f"blocked: {args['reason']}", control="block")
