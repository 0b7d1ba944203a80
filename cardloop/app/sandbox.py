"""The workflow sandbox our workers run in: Temporal's own, with one per-payload cost removed.

Since temporalio 1.35 the worker asks the workflow instance for a serialization context once or
twice for every payload of every activation and completion (which activity or child workflow the
payload belongs to). The sandboxed instance answers each question by compiling a code string and
running it under the import restrictions (`_Instance._run_code`). The answer is a lookup of the
SDK's own bookkeeping (pending activities and child workflows by sequence number): no workflow
code runs and nothing is imported. Measured: 58 us per lookup that way, 0.8 us as a direct call,
and about 85 lookups per one-turn card (bench/orchestration.py): about 5 ms of the worker's CPU
per card, some 6% of it.

`ContextDirectSandboxRunner` answers those two questions with a direct call into the sandboxed
instance. Everything that runs workflow code (creating the instance, each activation) still goes
through the sandbox with its restrictions, unchanged. If a future SDK changes the internals this
relies on, `workflow_runner()` falls back to the stock runner rather than guess.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

logger = logging.getLogger(__name__)

# Where the sandbox keeps its in-sandbox instance (temporalio/worker/workflow_sandbox/_runner.py).
IN_SANDBOX = "__temporal_in_sandbox"


class _DirectContextInstance(sandbox_runner._Instance):
    """A sandboxed workflow instance whose serialization-context lookups skip the exec."""

    def _in_sandbox(self) -> Any:
        return self.globals_and_locals[IN_SANDBOX]

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._in_sandbox().get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._in_sandbox().get_external_store_context(command_info)


@dataclass(frozen=True)
class ContextDirectSandboxRunner(SandboxedWorkflowRunner):
    """Temporal's sandboxed runner whose instances answer serialization-context lookups directly."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _DirectContextInstance(det, self.runner_class, self.restrictions)


def _internals_match() -> bool:
    """Whether this SDK's sandboxed instance is the one `_DirectContextInstance` was written
    against: it keeps the in-sandbox instance under IN_SANDBOX and looks contexts up through it."""
    instance = getattr(sandbox_runner, "_Instance", None)
    if instance is None:
        return False
    try:
        from temporalio.worker.workflow_sandbox._in_sandbox import InSandbox
    except ImportError:
        return False
    needed = ("get_serialization_context", "get_external_store_context")
    create = getattr(getattr(instance, "_create_instance", None), "__code__", None)
    keeps_it_there = create is not None and any(
        isinstance(const, str) and f"{IN_SANDBOX} = InSandbox(" in const for const in create.co_consts)
    return keeps_it_there and all(hasattr(instance, name) and hasattr(InSandbox, name) for name in needed)


def workflow_runner(restrictions: SandboxRestrictions) -> SandboxedWorkflowRunner:
    """The runner for our workflows: the direct-context sandbox where the SDK's internals are the
    ones it was written for, else Temporal's stock sandbox (correct, only slower)."""
    if _internals_match():
        return ContextDirectSandboxRunner(restrictions=restrictions)
    logger.warning("temporalio's sandbox internals changed: running workflows in the stock sandbox")
    return SandboxedWorkflowRunner(restrictions=restrictions)
