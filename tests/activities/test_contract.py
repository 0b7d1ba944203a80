"""Activity names are a contract: the worker registers exactly what the workflows call."""

from __future__ import annotations

import ast

from temporalio import activity, workflow

from cardloop.activities.deps import ActivityDeps
from cardloop.app.worker import WORKFLOWS, activities_for
from cardloop.contracts import names
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.store import Store
from tests.conftest import ROOT

CALLS = {"execute_activity", "execute_local_activity", "start_activity", "start_local_activity"}
# Workflow helpers that call an activity given as their first argument (workflows/workspace.py:
# the workspace's activities run on the worker that holds it; workflows/board.py: one board write,
# remote or local). Calls of these count as activity calls; their own execute_activity is the
# only place a name may arrive in a variable.
FORWARDERS = {"_on_worker", "_write"}


def _called_by_workflows() -> set[str]:
    called = set()
    for path in (ROOT / "workflows").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        forwarded = {id(n) for f in ast.walk(tree) if isinstance(f, ast.AsyncFunctionDef) and f.name in FORWARDERS
                     for n in ast.walk(f)}
        for node in ast.walk(tree):
            called_name = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                else node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
            if called_name is not None and \
                    ((called_name in CALLS and id(node) not in forwarded) or called_name in FORWARDERS):
                first = node.args[0]
                # A literal name here would be a second spelling of the contract.
                assert isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) \
                    and first.value.id == "names", f"{path.name}:{node.lineno}: call activities by names.X"
                called.add(getattr(names, first.attr))
    return called


def test_the_worker_registers_exactly_the_activities_the_workflows_call() -> None:
    with Store("sqlite://") as store:
        deps = ActivityDeps.build(load_config(REPO_CONFIG, env={}), store)
        registered = [activity._Definition.must_from_callable(fn).name for fn in activities_for(deps)]
    assert sorted(registered) == sorted(set(registered)), "an activity is registered twice"
    assert set(registered) == set(names.ACTIVITIES) == _called_by_workflows()


def test_workflow_names_come_from_the_contract() -> None:
    defined = {workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS}
    assert defined == {names.CARD_WORKFLOW, names.STAGE_WORKFLOW, names.RESEARCH_WORKFLOW}
