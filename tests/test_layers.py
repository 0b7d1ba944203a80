"""The layers import one way only, and the packaging names every package folder.

    prompts (pure) <- contracts <- store, integrations <- activities <- workflows(*) <- app
    (*) workflows see only contracts: names and payloads, never an activity's code.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

LAYER_DIRS = {
    "prompts": ROOT / "prompts",
    "contracts": ROOT / "cardloop" / "contracts",
    "store": ROOT / "cardloop" / "store",
    "integrations": ROOT / "cardloop" / "integrations",
    "activities": ROOT / "activities",
    "workflows": ROOT / "workflows",
    "app": ROOT / "cardloop" / "app",
}
# What each layer may import of ours (besides itself); `temporal` marks who may import temporalio.
ALLOWED = {
    "prompts": set(),
    "contracts": {"prompts"},
    "store": {"contracts", "prompts"},
    "integrations": {"contracts", "prompts"},
    "activities": {"integrations", "store", "contracts", "prompts", "temporal"},
    "workflows": {"contracts", "temporal"},
    "app": {"activities", "workflows", "integrations", "store", "contracts", "prompts", "temporal"},
}


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "temporalio":
        return "temporal"
    if parts[0] != "cardloop" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYER_DIRS else None


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("layer", sorted(LAYER_DIRS))
def test_each_layer_imports_only_the_layers_beneath_it(layer: str) -> None:
    wrong = []
    for path in sorted(LAYER_DIRS[layer].rglob("*.py")):
        for line, module in _imports(path):
            if module.split(".")[0] in ("prompts", "activities", "workflows"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} (use cardloop.{module})")
                continue
            target = _layer_of(module)
            if target is not None and target != layer and target not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({layer} may not use {target})")
    assert not wrong, "\n".join(wrong)


def test_the_top_level_cardloop_package_imports_nothing() -> None:
    assert [m for _, m in _imports(ROOT / "cardloop" / "__init__.py")] == []


def _declared_packages() -> tuple[list[str], dict[str, str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setuptools["packages"], setuptools["package-dir"]


def test_pyproject_packages_name_every_package_folder() -> None:
    packages, package_dir = _declared_packages()
    on_disk = set()
    for name, folder in package_dir.items():
        root = ROOT / folder
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            on_disk.add(".".join((name, *rel.parts)))
    assert set(packages) == on_disk


def test_dockerfile_copies_every_mapped_folder() -> None:
    _, package_dir = _declared_packages()
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for folder in set(package_dir.values()):
        assert f"COPY {folder} ./{folder}" in dockerfile
