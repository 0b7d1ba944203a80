"""Workflow code stays deterministic: what Temporal's sandbox does not check for us.

The worker passes every module through the sandbox (cardloop/app/worker.py), so our workflow
modules see the real `datetime`, `time` and `random`: the sandbox would not refuse
`datetime.now()` in them (tests/cardloop/app/test_sandbox.py shows it does refuse the builtins).
This check reads the workflows layer instead: only standard modules known to be deterministic,
no clock, sleep, randomness or I/O call, and no module-level state a run could change for the
next (a passed-through module is shared by every run in the worker). Replay of recorded
histories (tests/workflows/test_replay.py) checks the rest.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

WORKFLOWS = ROOT / "workflows"
# Standard modules workflow code may import, and which of their names where that matters.
DETERMINISTIC_MODULES = {"__future__", "asyncio", "collections", "collections.abc", "dataclasses", "enum",
                         "functools", "hashlib", "itertools", "json", "math", "re", "types", "typing"}
DETERMINISTIC_NAMES = {"datetime": {"datetime", "timedelta", "timezone"}}  # types only; calls are checked
# Calls that read a clock, sleep, draw randomness or wait outside Temporal's control.
FORBIDDEN_METHODS = {"now", "utcnow", "today", "fromtimestamp", "sleep", "wait", "as_completed", "wait_for",
                     "get_event_loop", "run_in_executor", "to_thread", "getenv"}
FORBIDDEN_BUILTINS = {"open", "input"}
MUTABLE_LITERALS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def violations(source: str, name: str = "<source>") -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {alias.name}" for alias in node.names
                      if not _ours(alias.name) and alias.name not in DETERMINISTIC_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and not _ours(node.module):
            allowed = DETERMINISTIC_NAMES.get(node.module)
            if allowed is not None:
                found += [f"{where} imports {node.module}.{alias.name}" for alias in node.names
                          if alias.name not in allowed]
            elif node.module not in DETERMINISTIC_MODULES:
                found.append(f"{where} imports {node.module}")
        elif isinstance(node, ast.Call):
            func = node.func
            # workflow.now(), workflow.sleep() and workflow.wait() are Temporal's deterministic versions.
            if isinstance(func, ast.Attribute):
                forbidden = func.attr in FORBIDDEN_METHODS and not (
                    isinstance(func.value, ast.Name) and func.value.id == "workflow")
            else:
                forbidden = isinstance(func, ast.Name) and func.id in FORBIDDEN_BUILTINS
            if forbidden:
                found.append(f"{where} calls {ast.unparse(func)}()")
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and isinstance(statement.value, MUTABLE_LITERALS):
            found.append(f"{name}:{statement.lineno} keeps module-level mutable state")
        if isinstance(statement, ast.Global) or any(isinstance(n, ast.Global) for n in ast.walk(statement)):
            found.append(f"{name}:{statement.lineno} rebinds a module global")
    return found


def _ours(module: str) -> bool:
    return module.split(".")[0] in {"cardloop", "temporalio"}


def module_file(module: str) -> Path | None:
    """Our source file for a dotted module name (pyproject's package-dir: cardloop.prompts,
    .activities and .workflows live in top-level folders), or None when it is not ours."""
    parts = module.split(".")
    if parts[0] != "cardloop":
        return None
    top = {"prompts": ROOT / "prompts", "activities": ROOT / "activities", "workflows": ROOT / "workflows"}
    if len(parts) > 1 and parts[1] in top:
        path = top[parts[1]].joinpath(*parts[2:])
    else:
        path = (ROOT / "cardloop").joinpath(*parts[1:])
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reached_from_workflows() -> set[Path]:
    """Every module of ours the workflows layer imports, directly or through another."""
    seen: set[Path] = set()
    todo = sorted(WORKFLOWS.rglob("*.py"))
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module, *(f"{node.module}.{a.name}" for a in node.names)] \
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            todo += [f for f in map(module_file, names) if f is not None and f not in seen]
    return seen


def test_what_the_workflows_reach_calls_nothing_nondeterministic() -> None:
    # The contracts and prompt models a workflow builds run inside it too (a validator that read
    # the clock would make the workflow read it). Their imports are free; their calls are not.
    reached = reached_from_workflows() - set(WORKFLOWS.rglob("*.py"))
    assert ROOT / "cardloop" / "contracts" / "payloads.py" in reached
    found = [v for path in sorted(reached)
             for v in violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
             if " calls " in v]
    assert not found, "\n".join(found)


def test_the_workflows_layer_calls_nothing_nondeterministic() -> None:
    found = [v for path in sorted(WORKFLOWS.rglob("*.py"))
             for v in violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("source", "named"), [
    ("import time\n", "imports time"),
    ("import random\n", "imports random"),
    ("from uuid import uuid4\n", "imports uuid"),
    ("from datetime import date\n", "imports datetime.date"),
    ("from datetime import datetime\nx = datetime.now()\n", "calls datetime.now()"),
    ("import asyncio\nasync def f():\n    await asyncio.sleep(1)\n", "calls asyncio.sleep()"),
    ("def f():\n    return open('x').read()\n", "calls open()"),
    ("SEEN = {}\n", "module-level mutable state"),
    ("import os\n", "imports os"),
    ("import asyncio\nasync def f(xs):\n    return await asyncio.wait(xs)\n", "calls asyncio.wait()"),
    ("COUNT = 0\ndef bump():\n    global COUNT\n    COUNT += 1\n", "rebinds a module global"),
])
def test_the_guard_names_each_kind_of_violation(source: str, named: str) -> None:
    assert any(named in v for v in violations(source)), violations(source)


def test_temporals_deterministic_versions_pass() -> None:
    source = ("from temporalio import workflow\nfrom datetime import datetime, timedelta\n"
              "async def f() -> datetime:\n    await workflow.sleep(timedelta(seconds=1))\n"
              "    await workflow.wait_condition(lambda: True)\n    return workflow.now()\n"
              "LIMITS = (1, 2)\nasync def g(hands):\n    return await hands.open()\n")
    assert violations(source) == []
