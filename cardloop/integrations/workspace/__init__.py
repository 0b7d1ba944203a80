"""The agent's workspace: a git worktree per card, the tools that act in it, the sandbox
their commands run in, and the repository's test command. Plain code: no Temporal here.

    manager = WorkspaceManager(root, clone_url_template=..., token=...)
    ws = manager.open(card)                                   # worktree on the card's branch
    toolbox = Toolbox(ToolContext(ws.path, ws.home, sandbox), offered=config.workspace.tools_for(stage))
    result = toolbox.execute("edit_file", {...})              # ToolResult(text, is_error)
    manager.checkpoint(ws, run=run_id, turn=n)                # commit + push, idempotent
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cardloop.contracts.config import Config, SandboxConfig
from cardloop.integrations.access import git_token, tenant_dir
from cardloop.integrations.workspace.errors import PushRejected, WorkspaceError
from cardloop.integrations.workspace.manager import Checkpoint, Workspace, WorkspaceManager, default_branch_name
from cardloop.integrations.workspace.sandbox import (
    CommandResult,
    Protections,
    Sandbox,
    SandboxLimits,
    WorkspaceView,
    detect_protections,
)
from cardloop.integrations.workspace.testcmd import TestRun, detect_test_command, repository_test_command, run_tests
from cardloop.integrations.workspace.tools import TOOLS, Toolbox, ToolContext, ToolResult


def sandbox_limits(cfg: SandboxConfig, hide: Sequence[str] = ()) -> SandboxLimits:
    return SandboxLimits(timeout=cfg.timeout_seconds, output_bytes=cfg.output_bytes, cpu_seconds=cfg.cpu_seconds,
                         memory_mb=cfg.memory_mb, max_processes=cfg.max_processes, max_file_mb=cfg.max_file_mb,
                         network=cfg.network == "allow", env_allow=tuple(cfg.env_allow), hide=tuple(hide))


def hidden_paths(config: Config) -> tuple[str, ...]:
    """What no command may see: every tenant's workspaces and clones ([workspace] root), the
    repository context source's checkouts ([sources.repository] cache_dir), the dev
    stack's data dir (its store, Temporal's database, the log) and a SQLite store's files
    wherever they are, with `[workspace.sandbox] hide_paths`, resolved. Paths that do not exist
    yet are named too (a worker builds its sandbox once; the workspace root or the source's cache
    may appear later): each command hides those that exist when it starts."""
    found: list[str] = []
    # Never what holds the interpreter and its tools (a root set to the project directory):
    # the commands run them.
    tools = Path(os.path.realpath(sys.prefix))

    def add(path: str | Path) -> None:
        real = os.path.realpath(Path(path).expanduser())
        if real not in found and not tools.is_relative_to(real):
            found.append(real)

    add(config.workspace.root)
    add(config.sources.repository.cache_dir)  # the context source's checkouts: every tenant's code
    add(config.dev.data_dir)
    url = config.store_url()
    if url.startswith("sqlite:///"):
        db = url.removeprefix("sqlite:///").split("?", 1)[0]
        for suffix in ("", "-wal", "-shm", "-journal"):
            add(db + suffix)
    for extra in config.workspace.sandbox.hide_paths:
        add(extra)
    return tuple(found)


def manager_from_config(config: Config, tenant: str, repo: str) -> WorkspaceManager:
    """The WorkspaceManager `tenant` works on `repo` with: clones as [sources.repository] says,
    with the tenant's git token, under [workspace] root (a folder per tenant when [tenants] is
    configured, so no two tenants share a clone). AccessDenied when the tenant may not use `repo`."""
    source = config.sources.repository
    return WorkspaceManager(tenant_dir(config, config.workspace.root, tenant), clone_url_template=source.clone_url,
                            token=git_token(config, tenant, repo), depth=source.depth)


__all__ = [
    "TOOLS",
    "Checkpoint",
    "CommandResult",
    "Protections",
    "PushRejected",
    "Sandbox",
    "SandboxLimits",
    "TestRun",
    "ToolContext",
    "ToolResult",
    "Toolbox",
    "Workspace",
    "WorkspaceError",
    "WorkspaceManager",
    "WorkspaceView",
    "default_branch_name",
    "detect_protections",
    "detect_test_command",
    "hidden_paths",
    "manager_from_config",
    "repository_test_command",
    "run_tests",
    "sandbox_limits",
]
