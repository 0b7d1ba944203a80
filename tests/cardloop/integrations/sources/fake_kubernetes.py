"""A Kubernetes API server for the Kubernetes source's tests: a loopback server speaking the
API's wire format for pods, events and logs, and pods, containers and logs to seed it with
(fixtures `cluster` and `make_source` in conftest.py)."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client as k8s

from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.integrations.sources.kubernetes import KubernetesSource
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card
from cardloop.prompts.stages import Stage

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




def configuration(url: str, token: str = TOKEN) -> k8s.Configuration:
    return k8s.Configuration(host=url, api_key={"authorization": f"Bearer {token}"})


def card(repo: str | None = "acme/payments-api") -> Card:
    return Card(id="PAY-142", title="Payments API crash-loops after the 1.42.0 deploy", repo=repo)


def gather(source: KubernetesSource, repo: str | None = "acme/payments-api") -> SourceResult:
    return source.gather(SourceRequest(card(repo), Stage.ERROR_FIXING))


def unavailable(source: KubernetesSource) -> UpstreamError:
    with pytest.raises(UpstreamError) as info:
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
