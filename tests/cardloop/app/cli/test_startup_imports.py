"""What a command imports before it runs: every module is start-up time the operator waits for.

`--help` once loaded the card models (pydantic, about 0.2 s) because a subcommand imported the
tenant-id rule from them, and every `cardloop tenant` command loaded the HTTP API, its services
and Temporal's worker SDK (about 2 s) to reuse the API's validation. Each case runs in a fresh
interpreter, since this one has imported everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PROBE = """
import contextlib, io, json, sys
from cardloop.app.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    code = main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


def loaded(tmp_path: Path, *argv: str) -> set[str]:
    env = {**os.environ, "HOME": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}"}
    run = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return set(json.loads(run.stdout.splitlines()[-1]))


def test_help_loads_no_models(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--help")
    assert "cardloop.app.cli.tenant" in modules  # the subcommands were registered...
    assert not {"pydantic", "cardloop.prompts.card", "sqlalchemy", "temporalio"} & modules  # ...without their models


@pytest.mark.parametrize("argv", [("tenant", "show", "acme"), ("tenant", "versions", "acme")])
def test_tenant_commands_load_neither_the_api_nor_temporal(tmp_path: Path, argv: tuple[str, ...]) -> None:
    modules = loaded(tmp_path, *argv)
    assert "cardloop.store" in modules
    assert not {"fastapi", "temporalio", "cardloop.app.api.tenants", "activities.deps"} & modules


def test_a_sqlite_store_does_not_load_postgresqls_dialect(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "tenant", "show", "acme")
    assert "cardloop.store" in modules and "sqlalchemy.dialects.sqlite" in modules
    assert not {m for m in modules if m.startswith("sqlalchemy.dialects.postgresql")}, "about 20 ms for nothing"
