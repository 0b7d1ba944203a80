"""What the workspace raises. Tools never raise (a refused or failed call is an error result
for the model); the manager does, for what the stage itself must handle:

    WorkspaceError          preparing, checkpointing or removing a workspace failed
        .retryable          False: the same call cannot succeed (no repository, a bad branch name)
        PushRejected        the remote refused the checkpoint push (a hook, a protected branch,
                            a non-fast-forward): never retryable; .detail is git's own message,
                            with credentials scrubbed
"""

from __future__ import annotations


class WorkspaceError(Exception):
    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message


class PushRejected(WorkspaceError):
    """The remote said no. Retrying pushes the same commit to the same refusal."""

    type_name = "PushRejected"

    def __init__(self, branch: str, detail: str) -> None:
        super().__init__(f"push to {branch} was rejected by the remote: {detail}", retryable=False)
        self.branch = branch
        self.detail = detail
