"""run_command: a shell command in the workspace, inside the sandbox (see sandbox.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cardloop.integrations.workspace.tools.base import ToolContext, ToolResult, excerpt, obj
from cardloop.integrations.workspace.tools.paths import confine, relative


class RunCommand:
    name = "run_command"
    description = (
        "Run a shell command (sh -c) in the repository, e.g. the tests. No network, no secrets in "
        "the environment, resource limits and a timeout apply; output is capped (head and tail kept)."
    )
    input_schema = obj({
        "command": {"type": "string", "description": "The command line, e.g. 'pytest -q tests/test_retry.py'."},
        "cwd": {"type": "string", "description": "Directory relative to the repository root (default '.')."},
        "timeout_seconds": {"type": "integer", "minimum": 1,
                            "description": "Stop the command after this many seconds (capped by the sandbox)."},
    }, ("command",))
    writes = True  # a command can change any file

    def run(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        cwd = confine(ctx.root, args.get("cwd", "."))
        timeout = args.get("timeout_seconds")
        done = ctx.sandbox.run(args["command"], cwd, ctx.home, timeout=float(timeout) if timeout else None,
                               stop=ctx.stop, view=ctx.view)
        where = relative(ctx.root, cwd)
        if done.timed_out:
            head = f"timed out after {done.seconds:.0f}s: the command and its children were killed"
        elif done.stopped:
            head = (f"stopped after {done.seconds:.0f}s (the stage was cancelled): "
                    "the command and its children were killed")
        else:
            head = f"exit code {done.exit_code} ({done.seconds:.1f}s)"
        if where != ".":
            head += f" in {where}"
        text = f"{head}\n{done.output}" if done.output else f"{head}\n(no output)"
        failed = done.timed_out or done.stopped or done.exit_code != 0
        return ToolResult(excerpt(text, ctx.max_result_chars), is_error=failed)
