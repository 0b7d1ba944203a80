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
    env = {**os.environ, "HOME": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}",
           # Nothing listens there: a card command loads what it needs, then stops at the connection.
           "CARDLOOP_TEMPORAL__ADDRESS": "127.0.0.1:1"}
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


@pytest.mark.parametrize("argv", [("card", "show", "acme/github-projects/NOT-THERE"),
                                  ("card", "move", "examples/card.json", "--to", "planning")])
def test_card_commands_load_neither_the_prompt_validator_nor_the_registries(tmp_path: Path,
                                                                            argv: tuple[str, ...]) -> None:
    """Over the 0.5 s target they were: the tenant-prompt validator (the store imported it for
    storing a prompt, about 12 ms) and the sources' and providers' registries (the config check
    named their entries, about 10 ms) are not theirs to load, nor a worker or the API."""
    modules = loaded(tmp_path, *argv)
    assert {"temporalio.client", "cardloop.store", "cardloop.contracts.config"} <= modules
    assert not {"cardloop.prompts.validate", "cardloop.integrations.sources.registry",
                "cardloop.integrations.providers.registry", "temporalio.worker", "cardloop.app.stack",
                "cardloop.prompts.assemble", "fastapi"} & modules
