"""KubernetesSource with the real `kubernetes` client against a loopback Kubernetes API.

`FakeCluster` is a small stdlib HTTP server that answers the three endpoints the source calls
in the API server's wire format: PodList and EventList JSON (filtered by labelSelector and
fieldSelector the way the API server filters), text/plain pod logs (tailLines, previous) and
Status objects for every error, with the API server's messages. It records every request so
tests check the query parameters the client really sent, and which RBAC permissions they need.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.config import incluster_config

from cardloop.integrations.sources.base import SourceRequest, SourceResult, SourceUnavailable
from cardloop.integrations.sources.kubernetes import KubernetesSource
from cardloop.prompts.card import Card, ContextKind
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.conftest import ROOT

TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImNhcmRsb29wIn0.sa-token-THAT-MUST-NEVER-LEAK-4f1c9e"
NOW = datetime.now(UTC).replace(microsecond=0)
NODE = "ip-10-0-12-34.eu-west-1.compute.internal"
PAYMENTS = {"acme/payments-api": ("payments", "app=payments-api")}


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the fake API server ---------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lowercased: HTTP header names are case-insensitive

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return body


def parse_bool(value: str | None) -> bool:
    # Go's strconv.ParseBool, which the API server uses for query booleans.
    if value is None:
        return False
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(value)


class FakeCluster:
    """The Kubernetes API paths KubernetesSource reads, with real shapes and messages."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.pods: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.events: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.logs: dict[tuple[str, str, str, bool], str] = {}
        self.failures: list[tuple[str, int, dict[str, Any], dict[str, str]]] = []
        self.requests: list[Seen] = []
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, content_type, body, headers = cluster.handle("GET", self.path, headers)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Audit-Id", str(uuid.uuid4()))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeCluster:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, pod: dict[str, Any], *, events: list[dict[str, Any]] = (), logs: dict[Any, str] | None = None,
            ) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.pods[ns].append(pod)
        self.events[ns].extend(events)
        for key, text in (logs or {}).items():
            container, previous = key if isinstance(key, tuple) else (key, False)
            self.logs[(ns, name, container, previous)] = text

    def fail(self, path_pattern: str, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.failures.append((path_pattern, code, body, headers or {}))

    def requests_to(self, suffix: str) -> list[Seen]:
        return [r for r in self.requests if r.path.endswith(suffix)]

    # -- routing ---------------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, headers: dict[str, str]) -> tuple[int, str, bytes, dict[str, str]]:
        url = urlsplit(raw_path)
        query = parse_qs(url.query, keep_blank_values=True)
        self.requests.append(Seen(method, url.path, query, headers))
        if headers.get("authorization") != f"Bearer {self.token}":
            return self.json(401, status_body(401, "Unauthorized", "Unauthorized"))
        for pattern, code, body, extra in self.failures:
            if re.search(pattern, url.path):
                return self.json(code, body, extra)
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods", url.path):
            return self.pod_list(m[1], query)
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/log", url.path):
            return self.pod_log(m[1], m[2], query)
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/events", url.path):
            return self.event_list(m[1], query)
        return self.json(404, status_body(404, "NotFound", "the server could not find the requested resource"))

    @staticmethod
    def json(code: int, body: dict[str, Any], headers: dict[str, str] | None = None,
             ) -> tuple[int, str, bytes, dict[str, str]]:
        return code, "application/json", json.dumps(body).encode(), headers or {}

    def pod_list(self, ns: str, query: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
        selector = (query.get("labelSelector") or [""])[0]
        wanted: list[tuple[str, str, bool]] = []
        for term in filter(None, (t.strip() for t in selector.split(","))):
            m = re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)", term)
            if not m:
                return self.json(400, status_body(400, "BadRequest", f"unable to parse requirement: "
                                                  f"<nil>: Invalid value: \"{term}\": found '(', expected: ','"))
            wanted.append((m[1], m[3], m[2] != "!="))
        items = [p for p in self.pods.get(ns, [])
                 if all((p["metadata"]["labels"].get(k) == v) == eq for k, v, eq in wanted)]
        return self.json(200, {"kind": "PodList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": "48213977"}, "items": items})

    def event_list(self, ns: str, query: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
        fields = {"involvedObject.name": ("involvedObject", "name"), "involvedObject.kind": ("involvedObject", "kind"),
                  "type": ("type",), "reason": ("reason",)}
        wanted: list[tuple[tuple[str, ...], str]] = []
        for term in filter(None, (query.get("fieldSelector") or [""])[0].split(",")):
            key, _, value = term.partition("=")
            key = key.rstrip("=")
            if key not in fields:
                return self.json(400, status_body(400, "BadRequest", f'"{key}" is not a known field selector: '
                                                  'only "metadata.name", "metadata.namespace"'))
            wanted.append((fields[key], value.lstrip("=")))

        def get(event: dict[str, Any], path: tuple[str, ...]) -> Any:
            for part in path:
                event = event.get(part) or {}
            return event

        items = [e for e in self.events.get(ns, []) if all(get(e, p) == v for p, v in wanted)]
        return self.json(200, {"kind": "EventList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": "48213977"}, "items": items})

    def pod_log(self, ns: str, name: str, query: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
        pod = next((p for p in self.pods.get(ns, []) if p["metadata"]["name"] == name), None)
        if pod is None:
            return self.json(404, status_body(404, "NotFound", f'pods "{name}" not found',
                                              {"name": name, "kind": "pods"}))
        names = [c["name"] for c in pod["spec"]["containers"]]
        container = (query.get("container") or [None])[0]
        if container is None:
            if len(names) > 1:
                return self.json(400, status_body(400, "BadRequest", f"a container name must be specified for pod "
                                                  f"{name}, choose one of: [{' '.join(names)}]"))
            container = names[0]
        if container not in names:
            return self.json(400, status_body(400, "BadRequest", f"container {container} is not valid for pod {name}"))
        try:
            previous = parse_bool((query.get("previous") or [None])[0])
            tail = int(query["tailLines"][0]) if "tailLines" in query else None
        except ValueError as exc:
            return self.json(400, status_body(400, "BadRequest", f"invalid query: {exc}"))
        text = self.logs.get((ns, name, container, previous))
        if text is None:
            if previous:
                message = f'previous terminated container "{container}" in pod "{name}" not found'
            else:
                message = (f'container "{container}" in pod "{name}" is waiting to start: '
                           "trying and failing to pull image")
            return self.json(400, status_body(400, "BadRequest", message))
        if tail is not None:
            text = "".join(text.splitlines(keepends=True)[-tail:]) if tail else ""
        return 200, "text/plain", text.encode(), {}


# --- realistic objects ---------------------------------------------------------------------


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def running(started: str) -> dict[str, Any]:
    return {"running": {"startedAt": started}}


def terminated(reason: str, code: int, started: str, finished: str) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": finished,
                           "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}"}}


def container(name: str, image: str, *, ready: bool, state: dict[str, Any], restarts: int = 0,
              last: dict[str, Any] | None = None) -> dict[str, Any]:
    started = "running" in state
    status: dict[str, Any] = {"name": name, "image": image, "imageID": f"{image.split(':')[0]}@sha256:{'ab12' * 16}",
                              "ready": ready, "restartCount": restarts, "started": started, "state": state,
                              "lastState": last or {}}
    if started or "terminated" in state or last:
        status["containerID"] = f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}"
    return status


def pod(name: str, ns: str, labels: dict[str, str], containers: list[dict[str, Any]], *, phase: str = "Running",
        started: str | None = None, scheduled: bool = True, unschedulable: str = "") -> dict[str, Any]:
    ready = all(c["ready"] for c in containers) and phase == "Running"
    not_ready = [c["name"] for c in containers if not c["ready"]]
    hash_ = name.rsplit("-", 2)[-2] if name.count("-") >= 2 else "5d8f7c9b6"
    start = started or ago(3 * 3600)
    conditions: list[dict[str, Any]] = [
        {"type": "PodScheduled", "status": "True" if scheduled else "False", "lastProbeTime": None,
         "lastTransitionTime": start,
         **({} if scheduled else {"reason": "Unschedulable", "message": unschedulable})},
    ]
    if scheduled:
        conditions += [
            {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": None, "lastTransitionTime": start},
            {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": start},
            {"type": "Ready", "status": "True" if ready else "False", "lastProbeTime": None,
             "lastTransitionTime": ago(60),
             **({} if ready else {"reason": "ContainersNotReady",
                                  "message": f"containers with unready status: [{' '.join(not_ready)}]"})},
            {"type": "ContainersReady", "status": "True" if ready else "False", "lastProbeTime": None,
             "lastTransitionTime": ago(60)},
        ]
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": "Burstable"}
    if scheduled:
        status.update({"hostIP": "10.0.12.34", "hostIPs": [{"ip": "10.0.12.34"}], "podIP": "10.244.3.17",
                       "podIPs": [{"ip": "10.244.3.17"}], "startTime": start, "containerStatuses": containers})
    return {
        "metadata": {
            "name": name, "generateName": name.rsplit("-", 1)[0] + "-", "namespace": ns,
            "uid": str(uuid.uuid4()), "resourceVersion": "48213911", "creationTimestamp": start,
            "labels": {**labels, "pod-template-hash": hash_},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name.rsplit("-", 1)[0],
                                 "uid": str(uuid.uuid4()), "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "containers": [{"name": c["name"], "image": c["image"], "imagePullPolicy": "IfNotPresent",
                            "resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "250m", "memory": "1Gi"}},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"} for c in containers],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", **({"nodeName": NODE} if scheduled else {}),
            "schedulerName": "default-scheduler",
        },
        "status": status,
    }


def event(pod_name: str, ns: str, reason: str, message: str, *, type_: str = "Normal", count: int = 1,
          first: str | None = None, last: str | None = None, field_path: str | None = None,
          component: str = "kubelet") -> dict[str, Any]:
    first = first or ago(600)
    last = last or first
    return {
        "metadata": {"name": f"{pod_name}.{uuid.uuid4().hex[:16]}", "namespace": ns, "uid": str(uuid.uuid4()),
                     "resourceVersion": "48213950", "creationTimestamp": first},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod_name, "uid": str(uuid.uuid4()),
                           "apiVersion": "v1", "resourceVersion": "48213911",
                           **({"fieldPath": field_path} if field_path else {})},
        "reason": reason, "message": message,
        "source": {"component": component, **({"host": NODE} if component == "kubelet" else {})},
        "firstTimestamp": first, "lastTimestamp": last, "count": count, "type": type_, "eventTime": None,
        "reportingComponent": component, "reportingInstance": NODE if component == "kubelet" else "",
    }


def crash_log(start: datetime) -> str:
    """A Python service that warms its caches, then dies building its webhook settings."""
    def at(offset_ms: int) -> str:
        return (start + timedelta(milliseconds=offset_ms)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    lines = [f"{at(0)} INFO payments.api: starting payments-api 1.42.0 (git 3f9c2ab) on Python 3.12.4, pid 1",
             f"{at(12)} INFO payments.db: connected to postgresql://payments-db.payments.svc:5432/payments "
             "(pool_size=10)",
             f"{at(40)} INFO payments.fx: warming exchange-rate cache from table fx_rates"]
    currencies = ["USD", "EUR", "GBP", "JPY", "CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "CAD", "AUD", "NZD"]
    n = 0
    for base in currencies:
        for quote in currencies:
            if base != quote:
                n += 1
                lines.append(f"{at(40 + n)} DEBUG payments.fx: loaded rate {base}/{quote}="
                             f"{1 + (n % 97) / 113:.4f} (as of 2025-05-12, source ecb)")
    lines += [
        f"{at(400)} INFO payments.fx: 182 rates cached",
        f"{at(410)} INFO payments.api: building routers: /v1/payments, /v1/refunds, /webhooks/stripe",
        "Traceback (most recent call last):",
        '  File "/app/.venv/bin/payments-api", line 8, in <module>',
        "    sys.exit(main())",
        "             ^^^^^^",
        '  File "/app/src/payments/api/__main__.py", line 41, in main',
        "    app = create_app(settings)",
        "          ^^^^^^^^^^^^^^^^^^^^",
        '  File "/app/src/payments/api/app.py", line 88, in create_app',
        "    app.include_router(build_webhook_router())",
        "                       ^^^^^^^^^^^^^^^^^^^^^^",
        '  File "/app/src/payments/webhooks/router.py", line 23, in build_webhook_router',
        "    settings = WebhookSettings()",
        "               ^^^^^^^^^^^^^^^^^",
        '  File "/app/.venv/lib/python3.12/site-packages/pydantic_settings/main.py", line 188, in __init__',
        "    super().__init__(",
        '  File "/app/.venv/lib/python3.12/site-packages/pydantic/main.py", line 253, in __init__',
        "    validated_self = self.__pydantic_validator__.validate_python(data, self_instance=self)",
        "                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for WebhookSettings",
        "stripe_webhook_secret",
        "  Field required [type=missing, input_value={'stripe_api_base': 'https://api.stripe.com'}, "
        "input_type=dict]",
        "    For further information visit https://errors.pydantic.dev/2.10/v/missing",
    ]
    return "\n".join(lines) + "\n"


def oom_log(start: datetime, batches: int) -> str:
    """A Python worker whose resident memory grows batch by batch until the kernel kills it."""
    lines = [f"{start:%Y-%m-%dT%H:%M:%S}Z INFO orders.reconcile: reconciler 2.3.1 starting (pid 1, memory limit 2Gi)",
             f"{start:%Y-%m-%dT%H:%M:%S}Z INFO orders.reconcile: loading open orders since 2025-05-01 "
             "from postgresql://orders-db.orders.svc:5432/orders"]
    for i in range(1, batches + 1):
        at = start + timedelta(seconds=2 * i)
        rss = 300 + i * 14.2
        size = f"{rss / 1024:.2f} GiB" if rss >= 1024 else f"{rss:.0f} MiB"
        lines.append(f"{at:%Y-%m-%dT%H:%M:%S}Z INFO orders.reconcile: batch {i}: {i * 10_000:,} rows "
                     f"in memory, rss={size}")
    return "\n".join(lines) + "\n"


# --- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster() as server:
        yield server


def configuration(url: str, token: str = TOKEN) -> k8s.Configuration:
    return k8s.Configuration(host=url, api_key={"authorization": f"Bearer {token}"})


@pytest.fixture
def make_source(cluster: FakeCluster, counter: TokenCounter) -> Iterator[Any]:
    made: list[KubernetesSource] = []

    def make(services: dict[str, tuple[str, str]] = PAYMENTS, *, url: str | None = None, token: str = TOKEN,
             **options: Any) -> KubernetesSource:
        source = KubernetesSource(services, configuration(url or cluster.url, token), count=counter.count, **options)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()


def card(repo: str | None = "acme/payments-api") -> Card:
    return Card(id="PAY-142", title="Payments API crash-loops after the 1.42.0 deploy", repo=repo)


def gather(source: KubernetesSource, repo: str | None = "acme/payments-api") -> SourceResult:
    return source.gather(SourceRequest(card(repo), Stage.ERROR_FIXING))


def unavailable(source: KubernetesSource) -> SourceUnavailable:
    with pytest.raises(SourceUnavailable) as info:
        gather(source)
    return info.value


CRASHING = "payments-api-7d9f8b6c5d-x2k4q"
HEALTHY = "payments-api-7d9f8b6c5d-9hm2z"
LABELS = {"app": "payments-api", "app.kubernetes.io/version": "1.42.0"}
IMAGE = "ghcr.io/acme/payments-api:1.42.0"


def add_crashloop(cluster: FakeCluster, name: str = CRASHING, *, restarts: int = 7) -> datetime:
    """A replica in CrashLoopBackOff; returns its last termination time."""
    previous_start = NOW - timedelta(seconds=330)
    latest_start = NOW - timedelta(seconds=25)
    finished = latest_start + timedelta(seconds=3)
    api = container("api", IMAGE, ready=False, restarts=restarts,
                    state=waiting("CrashLoopBackOff", f"back-off 5m0s restarting failed container=api pod={name}"
                                                      f"_payments({uuid.uuid4()})"),
                    last=terminated("Error", 1, ago(25), finished.strftime("%Y-%m-%dT%H:%M:%SZ")))
    cluster.add(
        pod(name, "payments", LABELS, [api]),
        events=[
            event(name, "payments", "Scheduled", f"Successfully assigned payments/{name} to {NODE}",
                  first=ago(1500), component="default-scheduler"),
            event(name, "payments", "Pulled", f'Container image "{IMAGE}" already present on machine',
                  count=restarts + 1, first=ago(1490), last=ago(26), field_path="spec.containers{api}"),
            event(name, "payments", "Created", "Created container: api", count=restarts + 1, first=ago(1490),
                  last=ago(26), field_path="spec.containers{api}"),
            event(name, "payments", "Started", "Started container api", count=restarts + 1, first=ago(1489),
                  last=ago(25), field_path="spec.containers{api}"),
            event(name, "payments", "BackOff", f"Back-off restarting failed container api in pod {name}_payments"
                  f"({uuid.uuid4()})", type_="Warning", count=31, first=ago(1450), last=ago(20),
                  field_path="spec.containers{api}"),
        ],
        logs={"api": crash_log(latest_start), ("api", True): crash_log(previous_start)},
    )
    return finished


def add_healthy(cluster: FakeCluster, name: str = HEALTHY) -> None:
    api = container("api", "ghcr.io/acme/payments-api:1.41.3", ready=True, state=running(ago(86_000)))
    cluster.add(
        pod(name, "payments", {"app": "payments-api", "app.kubernetes.io/version": "1.41.3"}, [api],
            started=ago(86_000)),
        events=[
            event(name, "payments", "Pulled", 'Container image "ghcr.io/acme/payments-api:1.41.3" already present',
                  first=ago(86_000)),
            # An old readiness blip: outside the warning window, it does not make the pod unhealthy.
            event(name, "payments", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503",
                  type_="Warning", count=2, first=ago(3 * 3600), last=ago(3 * 3600 - 30)),
        ],
        logs={"api": '10.244.1.9 - "GET /healthz HTTP/1.1" 200\n' * 50},
    )


# --- scenarios -----------------------------------------------------------------------------


def test_crashloop_item_has_status_events_and_the_traceback(cluster: FakeCluster, make_source: Any) -> None:
    finished = add_crashloop(cluster)
    add_healthy(cluster)
    result = gather(make_source())

    assert result.source == "kubernetes"
    [item] = result.items
    assert item.kind == ContextKind.POD_LOG
    assert item.source == f"k8s:payments/pod/{CRASHING}/api"
    assert item.title == f"{CRASHING}/api: CrashLoopBackOff, 7 restarts, last exit 1 (Error)"
    assert item.created_at == finished
    content = item.content
    status_at = content.index("State: waiting, CrashLoopBackOff: back-off 5m0s")
    events_at = content.index("Events (newest first):")
    log_at = content.index("Log of the ")
    assert status_at < events_at < log_at
    assert "Last termination: Error, exit code 1, started" in content
    assert f"Pod {CRASHING} in namespace payments (selector app=payments-api, node {NODE})" in content
    assert "Phase: Running; ready: no (ContainersNotReady: containers with unready status: [api])" in content
    # Newest event first: the back-off, with its count.
    first_event = content[events_at:].splitlines()[1]
    assert "Warning BackOff (x31): Back-off restarting failed container api" in first_event
    # The exception and its field survive the excerpt, in both instances' logs.
    for needle in ("pydantic_core._pydantic_core.ValidationError: 1 validation error for WebhookSettings",
                   "stripe_webhook_secret", "Field required [type=missing"):
        assert content.count(needle) == 2, needle
    assert "Log of the previous instance, before the last restart" in content
    assert "Log of the latest instance" in content

    # Both instances' logs are kept whole for later research.
    assert set(result.blobs) == {f"kubernetes/payments/{CRASHING}/api.log",
                                 f"kubernetes/payments/{CRASHING}/api.previous.log"}
    assert result.blobs[f"kubernetes/payments/{CRASHING}/api.previous.log"] == crash_log(NOW - timedelta(seconds=330))
    # The healthy replica is one line of notes, and nothing else.
    assert any(HEALTHY in note and "1 healthy" in note for note in result.notes)
    assert any(f"{CRASHING} (api CrashLoopBackOff)" in note for note in result.notes)
    assert HEALTHY not in content


def test_crashloop_requests_carry_the_right_query_parameters(cluster: FakeCluster, make_source: Any) -> None:
    add_crashloop(cluster)
    add_healthy(cluster)
    gather(make_source(tail_lines=500))

    [listing] = cluster.requests_to("/pods")
    assert listing.path == "/api/v1/namespaces/payments/pods"
    assert listing.arg("labelSelector") == "app=payments-api"
    assert listing.arg("limit") == "500"
    events = cluster.requests_to("/events")
    assert sorted(r.arg("fieldSelector") or "" for r in events) == sorted(
        [f"involvedObject.name={CRASHING}", f"involvedObject.name={HEALTHY}"])
    logs = cluster.requests_to("/log")
    # Only the crashing container's logs are read: the previous instance and the latest one.
    assert {r.path for r in logs} == {f"/api/v1/namespaces/payments/pods/{CRASHING}/log"}
    by_previous = {r.arg("previous"): r for r in logs}
    assert set(by_previous) == {"true", None}
    for r in logs:
        assert r.arg("container") == "api"
        assert r.arg("tailLines") == "500"
        assert r.arg("timestamps") == "false"
        # The container is not running: its log is final, a time window could only cut the crash.
        assert r.arg("sinceSeconds") is None
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in cluster.requests)


def test_long_log_is_excerpted_to_the_budget_keeping_the_exception(
    cluster: FakeCluster, make_source: Any, counter: TokenCounter
) -> None:
    add_crashloop(cluster)
    result = gather(make_source(excerpt_tokens=900))
    [item] = result.items
    log_part = item.content[item.content.index("Log of the "):]
    assert "lines cut ..." in log_part
    assert log_part.count("pydantic_core._pydantic_core.ValidationError") == 2
    # Two logs share the budget; the section headers cost a few tokens on top.
    assert counter.count(log_part) <= 900 + 120
    # The blob is the whole fetched log, cut nowhere.
    previous = result.blobs[f"kubernetes/payments/{CRASHING}/api.previous.log"]
    assert "loaded rate NZD/AUD=" in previous and "lines cut" not in previous


def test_identical_logs_of_two_instances_are_shown_once(cluster: FakeCluster, make_source: Any) -> None:
    add_crashloop(cluster)
    same = crash_log(NOW - timedelta(seconds=25))
    cluster.logs[("payments", CRASHING, "api", True)] = same
    cluster.logs[("payments", CRASHING, "api", False)] = same
    [item] = gather(make_source()).items
    assert item.content.count("ValidationError: 1 validation error for WebhookSettings") == 1
    assert "(the previous instance logged exactly the same)" in item.content


ORDERS = {"acme/orders": ("orders", "app.kubernetes.io/name=orders-reconciler,tier=worker")}
OOM_POD = "orders-reconciler-5f6c9d7b8-kq2lp"


def add_oom(cluster: FakeCluster) -> None:
    crash_start = NOW - timedelta(minutes=9)
    killed = crash_start + timedelta(seconds=2 * 118 + 1)  # just after the log's last batch
    restarted = killed + timedelta(seconds=12)
    reconciler = container(
        "reconciler", "registry.acme.internal/orders/reconciler:2.3.1", ready=True, restarts=3,
        state=running(restarted.strftime("%Y-%m-%dT%H:%M:%SZ")),
        last=terminated("OOMKilled", 137, crash_start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        killed.strftime("%Y-%m-%dT%H:%M:%SZ")),
    )
    proxy = container("cloud-sql-proxy", "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.11.0", ready=True,
                      state=running(ago(7200)))
    labels = {"app.kubernetes.io/name": "orders-reconciler", "tier": "worker"}
    cluster.add(
        pod(OOM_POD, "orders", labels, [reconciler, proxy], started=ago(7200)),
        events=[
            event(OOM_POD, "orders", "BackOff", f"Back-off restarting failed container reconciler in pod "
                  f"{OOM_POD}_orders({uuid.uuid4()})", type_="Warning", count=5, first=ago(3000), last=ago(300),
                  field_path="spec.containers{reconciler}"),
            event(OOM_POD, "orders", "Pulled", 'Container image "registry.acme.internal/orders/reconciler:2.3.1" '
                  "already present on machine", count=4, first=ago(7200), last=ago(300)),
            event(OOM_POD, "orders", "Started", "Started container reconciler", count=4, first=ago(7200),
                  last=ago(299)),
        ],
        logs={("reconciler", True): oom_log(crash_start, 118), "reconciler": oom_log(restarted, 20),
              "cloud-sql-proxy": "2025/05/12 10:00:00 Listening on 127.0.0.1:5432\n"},
    )
    # A pod of another service in the namespace: the selector must leave it out.
    other = container("api", "registry.acme.internal/orders/api:5.0.0", ready=False,
                      state=waiting("CrashLoopBackOff", "back-off"), restarts=2,
                      last=terminated("Error", 2, ago(100), ago(99)))
    cluster.add(pod("orders-api-6b7c8d9f4-zz9xw", "orders", {"app.kubernetes.io/name": "orders-api",
                                                              "tier": "web"}, [other]))


def test_oomkilled_container_names_oom_and_keeps_the_last_lines(cluster: FakeCluster, make_source: Any) -> None:
    add_oom(cluster)
    result = gather(make_source(ORDERS), repo="acme/orders")
    [item] = result.items
    assert item.title == f"{OOM_POD}/reconciler: Running, 3 restarts, OOMKilled (exit 137)"
    assert item.source == f"k8s:orders/pod/{OOM_POD}/reconciler"
    content = item.content
    assert "Last termination: OOMKilled, exit code 137 (SIGKILL)" in content
    assert "Resources: requests cpu=250m, memory=1Gi; limits memory=2Gi" in content
    assert item.created_at == NOW - timedelta(minutes=9) + timedelta(seconds=237)
    assert "Back-off restarting failed container reconciler" in content
    previous = content[content.index("Log of the previous instance"):content.index("Log of the running instance")]
    assert previous.rstrip().endswith("batch 118: 1,180,000 rows in memory, rss=1.93 GiB")
    assert "reconciler 2.3.1 starting (pid 1, memory limit 2Gi)" in previous
    assert "batch 20: 200,000 rows in memory" in content[content.index("Log of the running instance"):]
    # The sidecar is healthy: no item, no log read; the other service's pod is not selected.
    assert "Container cloud-sql-proxy" not in content and len(result.items) == 1
    logs = cluster.requests_to("/log")
    assert {r.arg("container") for r in logs} == {"reconciler"}
    assert all("orders-api" not in r.path for r in cluster.requests)
    [listing] = cluster.requests_to("/pods")
    assert listing.arg("labelSelector") == "app.kubernetes.io/name=orders-reconciler,tier=worker"
    # A running instance's log is bounded by time as well as lines; the crashed one's is not.
    by_previous = {r.arg("previous"): r for r in logs}
    assert by_previous[None].arg("sinceSeconds") == "86400"
    assert by_previous["true"].arg("sinceSeconds") is None


def test_healthy_pods_are_one_note_and_no_items(cluster: FakeCluster, make_source: Any) -> None:
    add_healthy(cluster)
    add_healthy(cluster, "payments-api-7d9f8b6c5d-k7t2n")
    result = gather(make_source())
    assert result.items == ()
    assert result.blobs == {}
    healthy = [n for n in result.notes if "healthy" in n and "unhealthy" not in n]
    assert len(healthy) == 1
    assert HEALTHY in healthy[0] and "payments-api-7d9f8b6c5d-k7t2n" in healthy[0] and "2 healthy" in healthy[0]
    assert cluster.requests_to("/log") == []


def test_pods_that_never_started_say_why_without_reading_logs(cluster: FakeCluster, make_source: Any) -> None:
    pulling = "payments-api-7d9f8b6c5d-p8v4c"
    api = container("api", "ghcr.io/acme/payments-api:1.42.1", ready=False,
                    state=waiting("ImagePullBackOff", 'Back-off pulling image "ghcr.io/acme/payments-api:1.42.1"'))
    cluster.add(pod(pulling, "payments", LABELS, [api], phase="Pending"), events=[
        event(pulling, "payments", "Failed", 'Failed to pull image "ghcr.io/acme/payments-api:1.42.1": '
              "rpc error: code = NotFound desc = failed to resolve reference: not found", type_="Warning", count=4,
              first=ago(500), last=ago(40)),
    ])
    unscheduled = "payments-api-7d9f8b6c5d-s2q9d"
    waiting_api = container("api", IMAGE, ready=False, state=waiting("ContainerCreating"))
    spec = pod(unscheduled, "payments", LABELS, [waiting_api], phase="Pending", scheduled=False,
               unschedulable="0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are available: "
                             "3 No preemption victims found for incoming pod.")
    cluster.add(spec, events=[
        event(unscheduled, "payments", "FailedScheduling", "0/3 nodes are available: 3 Insufficient memory.",
              type_="Warning", count=4, first=ago(900), last=ago(60), component="default-scheduler"),
    ])

    result = gather(make_source())
    items = {item.source: item for item in result.items}
    pulled = items[f"k8s:payments/pod/{pulling}/api"]
    assert pulled.title == f"{pulling}/api: ImagePullBackOff"
    assert "Log: not available (the container has not started, so it has no log yet)" in pulled.content
    assert "rpc error: code = NotFound" in pulled.content
    pending = items[f"k8s:payments/pod/{unscheduled}"]
    assert pending.title == f"{unscheduled}: Pending, Warning FailedScheduling (x4)"
    assert "Not scheduled: 0/3 nodes are available: 3 Insufficient memory." in pending.content
    assert cluster.requests_to("/log") == []


def test_only_max_pods_are_detailed_the_rest_are_named(cluster: FakeCluster, make_source: Any) -> None:
    for i in range(6):
        add_crashloop(cluster, f"payments-api-7d9f8b6c5d-r{i}x{i}q", restarts=i + 1)
    result = gather(make_source(max_pods=2))
    assert len(result.items) == 2
    assert any("4 more unhealthy, not detailed" in note for note in result.notes)
    assert len({r.path for r in cluster.requests_to("/log")}) == 2


def test_log_bytes_are_capped_keeping_the_end(cluster: FakeCluster, make_source: Any) -> None:
    add_crashloop(cluster)
    huge = "".join(f"DEBUG payments.fx: refreshing rate {i:06d} " + "x" * 180 + "\n" for i in range(2_000))
    cluster.logs[("payments", CRASHING, "api", True)] = huge + crash_log(NOW)
    result = gather(make_source(tail_lines=100_000, max_log_bytes=16_384))
    blob = result.blobs[f"kubernetes/payments/{CRASHING}/api.previous.log"]
    assert len(blob.encode()) <= 16_384
    assert blob.startswith("DEBUG payments.fx: refreshing rate") or blob.startswith(str(NOW.year))
    assert blob.endswith("For further information visit https://errors.pydantic.dev/2.10/v/missing\n")
    assert "bytes before the last 16,384 not kept" in result.items[0].content


# --- repositories without pods -------------------------------------------------------------


def test_unmapped_repo_and_card_without_repo_return_a_note_and_ask_nothing(
    cluster: FakeCluster, make_source: Any
) -> None:
    source = make_source()
    result = gather(source, repo="acme/billing-ui")
    assert result.items == () and result.blobs == {}
    assert len(result.notes) == 1 and "acme/billing-ui" in result.notes[0] and "no pods" in result.notes[0]
    result = gather(source, repo=None)
    assert result.items == () and "names no repository" in result.notes[0]
    assert cluster.requests == []


def test_repo_lookup_ignores_case_and_no_matching_pods_is_a_note(cluster: FakeCluster, make_source: Any) -> None:
    result = gather(make_source(), repo="Acme/Payments-API")
    assert result.items == ()
    assert result.notes == ("kubernetes: namespace payments, selector app=payments-api: no pods match",)


def test_invalid_service_mapping_fails_at_construction(cluster: FakeCluster, make_source: Any) -> None:
    with pytest.raises(ValueError, match="not a namespace name"):
        make_source({"acme/x": ("Payments_Prod", "app=x")})
    with pytest.raises(ValueError, match="label selector is empty"):
        make_source({"acme/x": ("payments", " ")})


# --- errors --------------------------------------------------------------------------------

FORBIDDEN_PODS = status_body(
    403, "Forbidden",
    'pods is forbidden: User "system:serviceaccount:cardloop:cardloop-worker" cannot list resource "pods" '
    'in API group "" in the namespace "payments"',
    {"kind": "pods"},
)


def test_403_on_pods_is_final_and_names_namespace_and_permission(cluster: FakeCluster, make_source: Any) -> None:
    cluster.fail(r"/namespaces/payments/pods$", 403, FORBIDDEN_PODS)
    err = unavailable(make_source())
    assert err.retryable is False
    assert "403 Forbidden" in err.reason
    assert "list pods in namespace 'payments'" in err.reason
    assert 'cannot list resource "pods" in API group "" in the namespace "payments"' in err.reason
    assert "needs 'list' on 'pods' in namespace 'payments'" in err.reason
    assert TOKEN not in err.reason


def test_403_on_logs_names_the_log_permission(cluster: FakeCluster, make_source: Any) -> None:
    add_crashloop(cluster)
    cluster.fail(r"/log$", 403, status_body(
        403, "Forbidden", f'pods "{CRASHING}" is forbidden: User "system:serviceaccount:cardloop:cardloop-worker" '
        'cannot get resource "pods/log" in API group "" in the namespace "payments"',
        {"name": CRASHING, "kind": "pods"}))
    err = unavailable(make_source())
    assert err.retryable is False
    assert "needs 'get' on 'pods/log' in namespace 'payments'" in err.reason


def test_401_with_a_wrong_token_is_final_and_never_shows_a_token(
    cluster: FakeCluster, make_source: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    wrong = "eyJhbGciOiJSUzI1NiJ9.WRONG-TOKEN-ALSO-SECRET"
    err = unavailable(make_source(token=wrong))
    assert err.retryable is False
    assert "401 Unauthorized" in err.reason and "list pods in namespace 'payments'" in err.reason
    assert wrong not in err.reason and TOKEN not in err.reason
    assert wrong not in caplog.text and TOKEN not in caplog.text


def test_429_is_retryable_after_the_servers_delay(cluster: FakeCluster, make_source: Any) -> None:
    cluster.fail(r"/pods$", 429, status_body(429, "TooManyRequests", "Too many requests, please try again later.",
                                             {"retryAfterSeconds": 7}), {"Retry-After": "7"})
    err = unavailable(make_source())
    assert err.retryable is True
    assert err.retry_after == 7.0
    assert "429" in err.reason


@pytest.mark.parametrize(("code", "reason", "retryable"), [
    (500, "InternalError", True),
    (503, "ServiceUnavailable", True),
    (504, "Timeout", True),
    (404, "NotFound", False),
])
def test_status_codes_are_classified(cluster: FakeCluster, make_source: Any, code: int, reason: str,
                                     retryable: bool) -> None:
    cluster.fail(r"/pods$", code, status_body(code, reason, f"the server says {reason}"))
    err = unavailable(make_source())
    assert err.retryable is retryable
    assert f"the server says {reason}" in err.reason and "payments" in err.reason


def test_kubelet_failure_while_reading_a_log_is_retryable(cluster: FakeCluster, make_source: Any) -> None:
    add_crashloop(cluster)
    cluster.fail(r"/log$", 500, status_body(500, "InternalError", f"Get \"https://10.0.12.34:10250/containerLogs/"
                                            f"payments/{CRASHING}/api\": dial tcp 10.0.12.34:10250: i/o timeout"))
    err = unavailable(make_source())
    assert err.retryable is True and "i/o timeout" in err.reason and "pods/log" in err.reason


def test_an_invalid_label_selector_is_final(cluster: FakeCluster, make_source: Any) -> None:
    err = unavailable(make_source({"acme/payments-api": ("payments", "app in (payments")}))
    assert err.retryable is False
    assert "unable to parse requirement" in err.reason and "label selector" in err.reason


def test_unreachable_cluster_fails_fast_and_retryable(make_source: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    source = make_source(url=f"http://127.0.0.1:{port}")
    started = time.monotonic()
    err = unavailable(source)
    assert time.monotonic() - started < 5
    assert err.retryable is True
    assert "unreachable" in err.reason and f"127.0.0.1:{port}" in err.reason
    assert "refused" in err.reason.lower()


def test_a_cluster_that_never_answers_times_out(make_source: Any) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever answers
        source = make_source(url=f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5, connect_timeout=0.5)
        started = time.monotonic()
        err = unavailable(source)
    assert time.monotonic() - started < 5
    assert err.retryable is True and "no answer within 0.5 s" in err.reason


# --- configuration: kubeconfig, in-cluster, no shared state --------------------------------


def test_kubeconfig_contexts_give_independent_sources(tmp_path: Path, counter: TokenCounter) -> None:
    other_token = "eyJhbGciOiJSUzI1NiJ9.PROD-TOKEN-SECRET"
    default_host = k8s.Configuration.get_default_copy().host
    with FakeCluster() as staging, FakeCluster(token=other_token) as prod:
        add_crashloop(staging)
        add_healthy(prod)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "staging", "preferences": {},
            "clusters": [{"name": "staging", "cluster": {"server": staging.url}},
                         {"name": "prod", "cluster": {"server": prod.url}}],
            "users": [{"name": "ci-staging", "user": {"token": TOKEN}},
                      {"name": "ci-prod", "user": {"token": other_token}}],
            "contexts": [{"name": "staging", "context": {"cluster": "staging", "user": "ci-staging"}},
                         {"name": "prod", "context": {"cluster": "prod", "user": "ci-prod"}}],
        }))
        before = kubeconfig.read_text()
        with KubernetesSource.from_kubeconfig(PAYMENTS, config_file=kubeconfig, count=counter.count) as a, \
                KubernetesSource.connect(PAYMENTS, kubeconfig=str(kubeconfig), context="prod",
                                         count=counter.count) as b:
            assert a.host == staging.url and b.host == prod.url
            first, second = gather(a), gather(b)
            assert TOKEN not in repr(a) and other_token not in repr(b)
        assert [i.source for i in first.items] == [f"k8s:payments/pod/{CRASHING}/api"]
        assert second.items == () and any(HEALTHY in n for n in second.notes)
        assert {r.headers["authorization"] for r in staging.requests} == {f"Bearer {TOKEN}"}
        assert {r.headers["authorization"] for r in prod.requests} == {f"Bearer {other_token}"}
        for text in (*first.notes, *second.notes, *(i.content for i in first.items)):
            assert TOKEN not in text and other_token not in text
    # Neither the client's global default nor the operator's kubeconfig was touched.
    assert k8s.Configuration.get_default_copy().host == default_host
    assert kubeconfig.read_text() == before


def test_a_passed_configuration_is_copied_not_changed(cluster: FakeCluster, counter: TokenCounter) -> None:
    conf = configuration(cluster.url)
    add_crashloop(cluster)
    with KubernetesSource(PAYMENTS, conf, count=counter.count) as source:
        conf.host = "http://127.0.0.1:9"  # a later change by the caller does not reach the source
        assert len(gather(source).items) == 1
    assert conf.retries is None


def test_in_cluster_uses_the_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             counter: TokenCounter) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUDummy\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    default_host = k8s.Configuration.get_default_copy().host
    with KubernetesSource.connect(PAYMENTS, count=counter.count) as source:
        assert source.host == "https://10.96.0.1:443"
        assert TOKEN not in repr(source)
    assert k8s.Configuration.get_default_copy().host == default_host


# --- RBAC ----------------------------------------------------------------------------------

RBAC = ROOT / "deploy" / "k8s" / "pod-reader" / "rbac.yaml"
ACCOUNTS = ROOT / "deploy" / "k8s" / "base" / "serviceaccounts.yaml"


def rbac_docs() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    worker = [d for d in yaml.safe_load_all(ACCOUNTS.read_text()) if d and d["metadata"]["name"] == "cardloop-worker"]
    # The account lives in the worker's namespace, which the base kustomization sets.
    account = {**worker[0], "metadata": {**worker[0]["metadata"], "namespace": "cardloop"}}
    return {d["kind"]: d for d in [*docs, account]}


def granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def test_rbac_grants_exactly_what_the_source_reads() -> None:
    docs = rbac_docs()
    assert set(docs) == {"ServiceAccount", "Role", "RoleBinding"}
    role, binding, account = docs["Role"], docs["RoleBinding"], docs["ServiceAccount"]
    assert granted(role) == {("", "pods", "list"), ("", "pods/log", "get"), ("", "events", "list")}
    assert all("resourceNames" not in rule for rule in role["rules"])
    # Namespaced: a Role and a RoleBinding (the pod-reader kustomization puts both in the service's
    # namespace), never cluster-wide.
    assert "namespace" not in role["metadata"] and "namespace" not in binding["metadata"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_every_request_the_source_makes_is_covered_by_the_role(cluster: FakeCluster, make_source: Any) -> None:
    add_crashloop(cluster)
    add_healthy(cluster)
    gather(make_source())
    grants = granted(rbac_docs()["Role"])

    def needs(seen: Seen) -> tuple[str, str, str]:
        assert seen.method == "GET"
        parts = seen.path.split("/")[5:]  # after /api/v1/namespaces/<ns>/
        if parts == ["pods"]:
            return ("", "pods", "list")
        if parts == ["events"]:
            return ("", "events", "list")
        if len(parts) == 3 and parts[0] == "pods" and parts[2] == "log":
            return ("", "pods/log", "get")
        raise AssertionError(f"unexpected request {seen.path}")

    used = {needs(r) for r in cluster.requests}
    assert used == {("", "pods", "list"), ("", "events", "list"), ("", "pods/log", "get")}
    assert used <= grants
