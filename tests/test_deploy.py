"""The deployment files stay consistent with the code: the worker's configuration loads."""

from __future__ import annotations

import yaml

from cardloop.app.startup import load_config
from cardloop.contracts.config import REPO_CONFIG
from tests.conftest import ROOT


def test_k8s_worker_config_is_valid_for_the_bundled_config() -> None:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "k8s" / "worker.yaml").read_text()))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    config = load_config(REPO_CONFIG, env={**config_map["data"], "DATABASE_URL": "postgresql://u@db/cardloop"})
    assert config.temporal.namespace == "cardloop"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["worker"]
    assert {"configMapRef", "secretRef"} <= {k for ref in container["envFrom"] for k in ref}

