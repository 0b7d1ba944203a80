"""What every tool is and returns.

A tool has a name, a description and a JSON Schema for its input (the providers' native tool
definitions are built from these three), and `run(ctx, args) -> ToolResult`. A tool never
raises to its caller: a refused call (a path outside the workspace, a tool the stage does not
offer, input that does not match the schema) or a failed one is a result with is_error=True,
which goes back to the model as the tool's answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from cardloop.integrations.workspace.sandbox import Sandbox, WorkspaceView
from cardloop.prompts.logs import excerpt_log

Control = Literal["finish", "block"]


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    # finish / block: the model asked to end the stage (the loop verifies a finish first).
    control: Control | None = None


@dataclass(frozen=True)
class ToolContext:
    root: Path                  # the workspace (worktree) directory
    home: Path                  # HOME for commands
    sandbox: Sandbox
    max_result_chars: int = 20_000
    git: str = "git"
    git_timeout: float = 60.0
    stop: threading.Event | None = None  # set when the call is cancelled: commands are killed
    # The git tools' environment from the workspace's manager (WorkspaceManager.git_env): it
    # restores the clone's config and names the gitdir, so nothing a command wrote there runs.
    git_env: Callable[[], Mapping[str, str]] | None = None
    # What run_command's commands see of the worker's hidden paths (WorkspaceManager.view).
    view: WorkspaceView | None = None


class Tool(Protocol):
    name: str
    description: str
    input_schema: Mapping[str, Any]
    writes: bool  # changes the workspace: offered only in stages that may

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult: ...


class ToolRefused(Exception):
    """Raised inside a tool for a call it refuses; the toolbox turns it into an error result."""


def error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


def _chars(text: str) -> int:
    # Tool results are sized in characters (~4 per token): no vocabulary is needed here.
    return (len(text) + 3) // 4


def excerpt(text: str, max_chars: int, count: Callable[[str], int] = _chars) -> str:
    """Head, tail and the lines around errors of a long result (prompts/logs.py's excerpt)."""
    if len(text) <= max_chars:
        return text
    return excerpt_log(text, max(max_chars // 4, 16), count).text


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "boolean": (bool,), "number": (int, float), "object": (dict,),
    "array": (list,),
}


def check_input(schema: Mapping[str, Any], args: Any) -> str | None:
    """The first way `args` breaks `schema` (the subset our tools use), or None."""
    if not isinstance(args, Mapping):
        return "the input must be a JSON object"
    props: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in args:
            return f"missing required field {name!r}"
    for name, value in args.items():
        if name not in props:
            if schema.get("additionalProperties", True) is False:
                return f"unknown field {name!r} (expected: {', '.join(props)})"
            continue
        want = props[name].get("type")
        types = _JSON_TYPES.get(want, (object,))
        if not isinstance(value, types) or (want in ("integer", "number") and isinstance(value, bool)):
            return f"field {name!r} must be of type {want}"
        if want == "integer" and "minimum" in props[name] and value < props[name]["minimum"]:
            return f"field {name!r} must be >= {props[name]['minimum']}"
    return None


def obj(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required),
            "additionalProperties": False}
