"""deploy/ stays deployable and consistent with the code: every kustomization renders (kustomize
inside Debian's `kubectl`), every object validates against the Kubernetes schemas
(kubernetes-validate, offline, strict: unknown fields are errors), and the policies hold:
least-privilege RBAC matching the calls the kubernetes source makes, restricted pods, resources
and probes on every container, pinned images, secrets only through secretKeyRef."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from functools import cache
from typing import Any

import kubernetes_validate
import pytest
import yaml

from cardloop.app.api.auth import ADMIN_TOKEN_ENV
from cardloop.app.startup import load_config
from cardloop.contracts.config import REPO_CONFIG
from tests.conftest import ROOT

KUBE_VERSION = "1.30"   # the oldest Kubernetes these manifests promise to run on
OVERLAYS = ["deploy/k8s/overlays/dev", "deploy/k8s/overlays/production"]
KUSTOMIZATIONS = [*OVERLAYS, "deploy/k8s/keda", "deploy/k8s/pod-reader", "deploy/temporal/setup"]
WORKLOAD_KINDS = {"Deployment", "Job"}
CRDS = {("keda.sh/v1alpha1", "ScaledObject")}   # not in the Kubernetes schemas


@cache
def render(path: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is missing (Debian package `kubectl`): it renders the kustomizations")
        pytest.skip("kubectl (Debian package `kubectl`) is not installed: cannot run kustomize")
    out = subprocess.run([kubectl, "kustomize", str(ROOT / path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs if d["kind"] in WORKLOAD_KINDS]


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_object_validates_against_the_kubernetes_schemas(path: str) -> None:
    docs = render(path)
    assert docs
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{path}: {doc['kind']}/{doc['metadata']['name']}: {exc.message} "
                                 f"at {'.'.join(map(str, exc.path))}") from None


def test_a_broken_manifest_is_caught_by_the_schema_check() -> None:
    deployment = one(render(OVERLAYS[1]), "Deployment", "cardloop-worker")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limts"] = {"cpu": "1"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("path", [*OVERLAYS, "deploy/temporal/setup"])
def test_pods_are_restricted_and_sized(path: str) -> None:
    for name, spec in pod_specs(render(path)):
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc.get("privileged") is not True, name
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert sc["runAsNonRoot"] is True, name
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), name
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), name
            image = c["image"]
            assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), f"{name}: unpinned {image}"
            # Every writable path is a named volume: /tmp at least.
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            assert "/tmp" in mounts, name
            declared = {v["name"] for v in spec.get("volumes", [])}
            assert set(mounts.values()) <= declared, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_long_running_containers_have_probes_on_real_endpoints(overlay: str) -> None:
    docs = render(overlay)
    expected = {"cardloop-worker": ("/livez", "/readyz"), "cardloop-api": ("/livez", "/healthz")}
    for name, spec in pod_specs(docs):
        [c] = spec["containers"]
        live, ready = c["livenessProbe"]["httpGet"], c["readinessProbe"]["httpGet"]
        assert (live["path"], ready["path"]) == expected[name]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert live["port"] in ports and ready["port"] in ports
    # The worker's probe port is the one its health endpoint listens on, on all interfaces.
    config = config_of(docs)
    worker = one(docs, "Deployment", "cardloop-worker")["spec"]["template"]["spec"]
    assert worker["containers"][0]["ports"][0]["containerPort"] == config.worker.health_port
    assert config.worker.health_host == "0.0.0.0"
    assert config.api.host == "0.0.0.0"
    # SIGTERM: the grace period outlasts the worker's own graceful shutdown of activities.
    assert worker["terminationGracePeriodSeconds"] > config.worker.graceful_shutdown_seconds + 10


def config_of(docs: list[dict[str, Any]]):
    [config_map] = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("cardloop-config")]
    return load_config(REPO_CONFIG, env={**config_map["data"], "CARDLOOP_CODEC_KEYS": "k:" + "A" * 43 + "="})


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_config_map_is_valid_configuration_and_holds_no_secret(overlay: str) -> None:
    docs = render(overlay)
    config = config_of(docs)
    assert config.temporal.namespace == "cardloop" and config.temporal.encrypt_payloads
    # The agent's checkouts on the workspaces volume (10 GiB), not under HOME on the 1 GiB tmp one.
    assert config.workspace.root == "/var/lib/cardloop/workspaces"
    [config_map] = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("cardloop-config")]
    assert not set(config_map["data"]) & secret_env_names()


def board_write_tokens() -> set[str]:
    """What the worker writes results back to each board with (boards.<b>.write_token_env)."""
    return {b.write_token_env for b in load_config(REPO_CONFIG, env={}).boards.values() if b.write_token_env}


def secret_env_names() -> set[str]:
    """Every environment variable cardloop reads a secret from, found in the code and config."""
    config = load_config(REPO_CONFIG, env={})
    names = {"DATABASE_URL", ADMIN_TOKEN_ENV, config.temporal.api_key_env, config.temporal.codec_keys_env,
             config.board("github").token_env, config.sources.github.token_env,
             config.sources.github.app_id_env, config.sources.github.app_private_key_env,
             config.sources.repository.token_env}
    names |= {p.api_key_env for p in config.profiles.values() if p.api_key_env}
    names |= board_write_tokens()
    for path in (ROOT / "cardloop" / "app" / "boards").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "secret_env" for t in node.targets):
                names.add(ast.literal_eval(node.value))
    return names


def test_secret_names_found_in_the_code_cover_the_readme() -> None:
    names = secret_env_names()
    assert {"ANTHROPIC_API_KEY", "CARDLOOP_GITHUB_WEBHOOK_SECRET", "CARDLOOP_TRELLO_SECRET", "TEMPORAL_API_KEY",
            "CARDLOOP_CODEC_KEYS", "CARDLOOP_ADMIN_TOKEN", "CARDLOOP_GITHUB_TOKEN"} <= names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_secret_comes_from_a_secret_key_ref(overlay: str) -> None:
    docs = render(overlay)
    secrets = secret_env_names()
    board_secrets = {n for n in secrets if n.endswith("_WEBHOOK_SECRET") or n == "CARDLOOP_TRELLO_SECRET"}
    # The worker serves no webhook; the API writes to no board (GitHub's token also reads, so it stays).
    needs = {"cardloop-api": secrets - (board_write_tokens() - {"CARDLOOP_GITHUB_TOKEN"}),
             "cardloop-worker": secrets - board_secrets - {ADMIN_TOKEN_ENV}}
    for name, spec in pod_specs(docs):
        [c] = spec["containers"]
        env = {e["name"]: e for e in c.get("env", [])}
        assert needs[name] <= set(env), f"{name} lacks {sorted(needs[name] - set(env))}"
        for var in set(env) & secrets:
            ref = env[var].get("valueFrom", {}).get("secretKeyRef")
            assert ref and ref["key"] == var and "value" not in env[var], f"{name}: {var} is not a secretKeyRef"
        assert all("secretRef" not in source for source in c.get("envFrom", []))
        required = {var for var in env if not env[var]["valueFrom"]["secretKeyRef"].get("optional")}
        assert required == {"DATABASE_URL", "CARDLOOP_CODEC_KEYS"}, name


def kubernetes_source_calls() -> set[tuple[str, str]]:
    """(resource, verb) of every Call(...) the kubernetes context source guards its requests with."""
    package = ROOT / "cardloop" / "integrations" / "sources" / "kubernetes"
    text = "\n".join(f.read_text() for f in sorted(package.glob("*.py")))
    return {(resource, verb) for verb, resource in re.findall(r'\bCall\("(\w+)", "([\w/]+)"', text)}


def test_rbac_grants_exactly_the_reads_the_kubernetes_source_makes() -> None:
    docs = render("deploy/k8s/overlays/production")
    [role] = of_kind(docs, "Role")
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == kubernetes_source_calls() == {("pods", "list"), ("pods/log", "get"), ("events", "list")}
    assert all(rule["apiGroups"] == [""] and "resourceNames" not in rule for rule in role["rules"])
    assert not of_kind(docs, "ClusterRole") and not of_kind(docs, "ClusterRoleBinding")
    [binding] = of_kind(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"] != "cardloop"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cardloop-worker", "namespace": "cardloop"}]
    api = one(docs, "ServiceAccount", "cardloop-api")
    assert api["automountServiceAccountToken"] is False


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_scaling_disruption_and_exposure_fit_the_workloads(overlay: str) -> None:
    docs = render(overlay)
    labels = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in of_kind(docs, "Deployment")}
    for pdb in of_kind(docs, "PodDisruptionBudget"):
        selector = pdb["spec"]["selector"]["matchLabels"]
        assert selector.items() <= labels[pdb["metadata"]["name"]].items()
    [hpa] = of_kind(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "cardloop-worker"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    [ingress] = of_kind(docs, "Ingress")
    hosts = {r["host"] for r in ingress["spec"]["rules"]}
    assert hosts <= {h for t in ingress["spec"]["tls"] for h in t["hosts"]}, "every host is served over TLS"
    service = one(docs, "Service", "cardloop-api")
    assert service["spec"]["selector"].items() <= labels["cardloop-api"].items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_egress_is_limited_to_dns_temporal_postgres_and_https(overlay: str) -> None:
    docs = render(overlay)
    policies = of_kind(docs, "NetworkPolicy")
    deny = one(docs, "NetworkPolicy", "cardloop-default-deny")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    ports = {p["port"] for np in policies for rule in np["spec"].get("egress", []) for p in rule["ports"]}
    assert ports == {53, 7233, 5432, 443, 6443}
    https = [rule for np in policies for rule in np["spec"].get("egress", [])
             if any(p["port"] == 443 for p in rule["ports"]) and rule["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"]
    assert https and all("169.254.0.0/16" in r["to"][0]["ipBlock"]["except"] for r in https)


def test_keda_variant_replaces_the_cpu_autoscaler_with_the_task_queue_backlog() -> None:
    docs = render("deploy/k8s/keda")
    assert not of_kind(docs, "HorizontalPodAutoscaler")
    [scaled] = of_kind(docs, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "cardloop-worker"
    config = config_of(docs)
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "temporal"
    assert trigger["metadata"]["taskQueue"] == config.temporal.task_queue
    assert trigger["metadata"]["namespace"] == config.temporal.namespace
    assert trigger["metadata"]["endpoint"] == config.temporal.address


def test_temporal_setup_job_runs_the_setup_command_against_the_same_temporal() -> None:
    docs = render("deploy/temporal/setup")
    [job] = of_kind(docs, "Job")
    [c] = job["spec"]["template"]["spec"]["containers"]
    assert c["args"][0] == "temporal-setup"
    [config_map] = of_kind(docs, "ConfigMap")
    cluster = config_of(render(OVERLAYS[1]))
    assert config_map["data"]["CARDLOOP_TEMPORAL__ADDRESS"] == cluster.temporal.address
    assert config_map["data"]["CARDLOOP_TEMPORAL__NAMESPACE"] == cluster.temporal.namespace


def test_temporal_helm_values_use_postgres_and_sql_visibility() -> None:
    values = yaml.safe_load((ROOT / "deploy" / "temporal" / "values.yaml").read_text())
    persistence = values["server"]["config"]["persistence"]
    stores = persistence["datastores"]
    assert stores[persistence["defaultStore"]]["sql"]["pluginName"] == "postgres12"
    assert stores[persistence["visibilityStore"]]["sql"]["pluginName"] == "postgres12"
    assert all("password" not in s["sql"] and s["sql"]["existingSecret"] for s in stores.values())
    env = {e["name"]: e["value"] for e in values["web"]["additionalEnv"]}
    assert env["TEMPORAL_CODEC_ENDPOINT"].endswith(f":{load_config(REPO_CONFIG, env={}).codec_server.port}")


def test_dockerfile_is_multi_stage_pinned_non_root_and_installs_only_wheels() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(stages) == 2 and all(":" in s and not s.endswith(":latest") for s in stages)
    runtime = text[text.rindex("\nFROM "):]
    assert "pip wheel" in text[:text.rindex("\nFROM ")]
    installs = re.findall(r"pip install[^\n]*", runtime)
    assert installs and all("--no-index" in i for i in installs), "the runtime stage installs from the wheels only"
    user = re.findall(r"^USER (\S+)", runtime, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    for src in re.findall(r"^COPY (?!--from)(\S+)", text, re.M):
        assert (ROOT / src).exists(), f"COPY {src}: no such path"
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert not ignored & {"prompts", "workflows", "activities", "cardloop", "config.toml", "README.md",
                          "pyproject.toml"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_metrics_are_served_on_their_own_port_that_only_prometheus_reaches(overlay: str) -> None:
    docs = render(overlay)
    obs = config_of(docs).observability
    assert obs.metrics_port and obs.metrics_host == "0.0.0.0"
    for name, spec in pod_specs(docs):
        if name in ("cardloop-worker", "cardloop-api"):
            ports = {p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
            assert ports["metrics"] == obs.metrics_port, name
    service = one(docs, "Service", "cardloop-api")
    assert all(p["targetPort"] != "metrics" and p.get("port") != obs.metrics_port for p in service["spec"]["ports"])
    admitted = [np for np in of_kind(docs, "NetworkPolicy") for rule in np["spec"].get("ingress", [])
                if any(p["port"] == obs.metrics_port for p in rule.get("ports", []))]
    assert [np["metadata"]["name"].removesuffix("-prod") for np in admitted] == ["cardloop-metrics-ingress"]
