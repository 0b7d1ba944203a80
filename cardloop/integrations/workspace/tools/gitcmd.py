"""Local, read-only git for the tools: no network, no credentials, no hooks, no fsmonitor, no
system or global config, and (with `ctx.git_env`) the worker's gitdir with its config restored,
so no filter, textconv or diff program a command configured runs here."""

from __future__ import annotations

import os
import subprocess

from cardloop.integrations.workspace.tools.base import ToolContext, ToolRefused

_SAFE = ["-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
         "-c", "color.ui=false", "-c", "protocol.allow=never"]


def run_git(ctx: ToolContext, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(ctx.home), "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
           "GIT_OPTIONAL_LOCKS": "0"}
    if ctx.git_env is not None:
        env.update(ctx.git_env())
    try:
        done = subprocess.run([ctx.git, *_SAFE, *args], cwd=ctx.root, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=ctx.git_timeout)
    except subprocess.TimeoutExpired:
        raise ToolRefused(f"git {args[0]} timed out after {ctx.git_timeout:g}s") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-500:]
        raise ToolRefused(f"git {args[0]} failed: {detail or f'exit {done.returncode}'}")
    return done.stdout.decode("utf-8", "replace")


def workspace_files(ctx: ToolContext, under: str = ".") -> list[str]:
    """Tracked and untracked files, .gitignore respected (`git ls-files -co --exclude-standard`)."""
    out = run_git(ctx, "ls-files", "-co", "--exclude-standard", "-z", "--", under)
    return sorted({p for p in out.split("\0") if p})
