"""research: the agent asks a question about this stage's logs that are too large to read
(issue 14). The stage workflow answers it itself, with a ResearchWorkflow child whose report
becomes the tool result; this class is the tool's definition for the model, and what a worker
answers should a research call ever reach it (an older workflow that did not intercept it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolResult, obj

NAME = "research"  # cardloop.contracts.names.RESEARCH_TOOL


class Research:
    name = NAME
    description = ("Ask a question about this stage's build and pod logs, including ones too large to read: "
                   "analysts read the relevant parts in parallel and you get a cited report with the exact error "
                   "strings. Use it before guessing from an excerpt.")
    input_schema = obj({"question": {"type": "string", "description": "What to find out, e.g. 'why did the "
                                                                       "integration tests fail?'"}}, ("question",))
    writes = False

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult("research runs in the stage's workflow, not on a workspace worker: nothing was "
                          "researched", is_error=True)
