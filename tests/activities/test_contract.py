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


def _called_by_workflows() -> set[str]:
    called = set()
    for path in (ROOT / "workflows").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS:
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
    assert defined == {names.CARD_WORKFLOW, names.STAGE_WORKFLOW}
