"""The payload models are built on first use (defer_build): a CLI command builds the few it
touches, a worker or the API all of them as it starts. Built either way, they validate and
serialize alike."""

from __future__ import annotations

import json
import subprocess
import sys

from pydantic import BaseModel

from cardloop.contracts import payloads
from tests.conftest import ROOT


def models() -> list[type[BaseModel]]:
    return [v for v in vars(payloads).values()
            if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == payloads.__name__]


def test_loading_the_config_builds_no_payload_model() -> None:
    """A fresh interpreter: this one may have built them all already."""
    code = ("import json; from pydantic import BaseModel; from cardloop.contracts.config import REPO_CONFIG, "
            "load_config; from cardloop.contracts import payloads as p; load_config(REPO_CONFIG, env={}); "
            "print(json.dumps(sorted(n for n, v in vars(p).items() if isinstance(v, type) "
            "and issubclass(v, BaseModel) and v.__module__ == p.__name__ and v.__pydantic_complete__)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(run.stdout) == []


def test_build_models_builds_every_one() -> None:
    payloads.build_models()
    assert len(models()) > 50
    assert all(m.__pydantic_complete__ for m in models())


def test_a_model_built_on_first_use_validates_and_serializes_as_before() -> None:
    """In a fresh interpreter, CardState (and the StageRun it holds) built by its first use; the
    same value through the built-up-front models of this one."""
    data = {"stage": "coding", "status": "running", "history": [{"stage": "planning", "run": 1,
                                                                 "outcome": "completed", "unavailable": ["x"]}],
            "current": {"iteration": 2}, "ignored": 1}
    code = ("import json, sys; from cardloop.contracts.payloads import CardState; "
            "print(CardState.model_validate_json(sys.argv[1]).model_dump_json())")
    run = subprocess.run([sys.executable, "-c", code, json.dumps(data)], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    payloads.build_models()
    assert run.stdout.strip() == payloads.CardState.model_validate(data).model_dump_json()
    assert json.loads(run.stdout)["history"][0]["unavailable"] == ["x"]
