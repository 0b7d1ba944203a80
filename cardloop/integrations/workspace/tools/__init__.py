"""The agent's tools and the per-stage toolbox that runs them.

    toolbox = Toolbox(ctx, offered=("read_file", "search", ...))   # the stage's set, from config.toml
    toolbox.specs()                      # ToolSpecs for Conversation.tools (providers' native tools)
    toolbox.execute("edit_file", {...})  # ToolResult; never raises

A tool not offered in the stage, an unknown tool, input that breaks the tool's schema, a path
outside the workspace, and any failure inside the tool come back as an error result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import (
    Tool,
    ToolContext,
    ToolRefused,
    ToolResult,
    check_input,
    error,
)
from cardloop.integrations.workspace.tools.command import RunCommand
from cardloop.integrations.workspace.tools.control import Block, Finish
from cardloop.integrations.workspace.tools.edit import EditFile
from cardloop.integrations.workspace.tools.git_tools import GitDiff, GitStatus
from cardloop.integrations.workspace.tools.listing import ListFiles
from cardloop.integrations.workspace.tools.read import ReadFile
from cardloop.integrations.workspace.tools.research import Research
from cardloop.integrations.workspace.tools.review import ReviewComment
from cardloop.integrations.workspace.tools.search import Search
from cardloop.integrations.workspace.tools.write import WriteFile
from cardloop.prompts.conversation import ToolSpec

logger = logging.getLogger(__name__)

TOOLS: dict[str, Tool] = {t.name: t for t in (
    ReadFile(), WriteFile(), EditFile(), ListFiles(), Search(), RunCommand(), GitDiff(), GitStatus(), Finish(), Block(),
    ReviewComment(), Research(),
)}
READ_ONLY: tuple[str, ...] = tuple(name for name, tool in TOOLS.items() if not tool.writes)


def spec(tool: Tool) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, tool.input_schema)


class Toolbox:
    def __init__(self, ctx: ToolContext, offered: Iterable[str]) -> None:
        offered = tuple(offered)
        unknown = [n for n in offered if n not in TOOLS]
        if unknown:
            raise ValueError(f"unknown tools {unknown} (known: {', '.join(TOOLS)})")
        self.ctx = ctx
        self.offered = offered

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(spec(TOOLS[name]) for name in self.offered)

    def execute(self, name: str, args: Mapping[str, Any] | Any) -> ToolResult:
        if name not in self.offered:
            known = "is not a tool" if name not in TOOLS else "is not offered in this stage"
            return error(f"{name!r} {known}; the tools here are: {', '.join(self.offered)}")
        tool = TOOLS[name]
        problem = check_input(tool.input_schema, args)
        if problem:
            return error(f"{name}: invalid input: {problem}")
        try:
            return tool.run(self.ctx, args)
        except ToolRefused as exc:
            return error(f"{name}: {exc}")
        except Exception as exc:  # a tool's own failure is the model's information, not the activity's crash
            logger.warning("tool %s failed", name, exc_info=True)
            return error(f"{name} failed: {type(exc).__name__}: {exc}")


__all__ = ["READ_ONLY", "TOOLS", "Tool", "ToolContext", "ToolResult", "Toolbox", "spec"]
