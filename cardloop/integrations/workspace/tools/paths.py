"""Paths the model names, confined to the workspace.

Refused: an absolute path, any `..` component, a NUL byte, anything under `.git` (the
repository's own machinery, and in a worktree a pointer to the shared clone), and a path
whose resolved location (every symlink followed) is outside the workspace. A symlink inside
the workspace that points inside it is fine.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from cardloop.integrations.workspace.tools.base import ToolRefused


def confine(root: Path, raw: str) -> Path:
    """The real location of `raw` inside `root`, or ToolRefused saying why not."""
    if not isinstance(raw, str) or "\0" in raw:
        raise ToolRefused("invalid path")
    text = raw.strip() or "."
    pure = PurePosixPath(text.replace("\\", "/"))
    if pure.is_absolute() or text.startswith("~") or (len(text) > 1 and text[1] == ":"):
        raise ToolRefused(f"path {raw!r} is absolute: give a path relative to the repository root")
    if ".." in pure.parts:
        raise ToolRefused(f"path {raw!r} leaves the workspace ('..' is not allowed)")
    if ".git" in pure.parts:
        raise ToolRefused(f"path {raw!r} is inside .git: use git_status and git_diff instead")
    base = root.resolve()
    resolved = (base / pure).resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise ToolRefused(f"path {raw!r} resolves outside the workspace (a symlink): refused")
    if ".git" in resolved.relative_to(base).parts:
        raise ToolRefused(f"path {raw!r} resolves into .git: refused")
    return resolved


def relative(root: Path, path: Path) -> str:
    rel = path.relative_to(root.resolve()).as_posix()
    return rel or "."
