"""KubernetesSource with the real `kubernetes` client against a loopback Kubernetes API
(fake_kubernetes.py).

`FakeCluster` is a small stdlib HTTP server that answers the three endpoints the source calls
in the API server's wire format: PodList and EventList JSON (filtered by labelSelector and
fieldSelector the way the API server filters), text/plain pod logs (tailLines, previous) and
Status objects for every error, with the API server's messages. It records every request so
tests check the query parameters the client really sent, and which RBAC permissions they need.
"""

from __future__ import annotations

import socket
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.config import incluster_config

from cardloop.integrations.sources.kubernetes import KubernetesSource
from cardloop.prompts.card import ContextKind
from cardloop.prompts.tokens import TokenCounter
from tests.cardloop.integrations.sources.fake_kubernetes import (
    CRASHING,
    HEALTHY,
    IMAGE,
    LABELS,
    NODE,
    NOW,
    PAYMENTS,
    TOKEN,
    FakeCluster,
    Seen,
    add_crashloop,
    add_healthy,
    ago,
    configuration,
    container,
    crash_log,
    event,
    gather,
    oom_log,
    pod,
    running,
    status_body,
    terminated,
    unavailable,
    waiting,
)
from tests.conftest import ROOT


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


def test_colour_codes_are_stripped_from_the_excerpt_and_kept_in_the_blob(cluster: FakeCluster,
                                                                         make_source: Any) -> None:
    """A service logging with colours (50 `\\x1b[...m` sequences): the item reads as the terminal
    shows it, as GitHub Actions excerpts do; the whole log kept for research is untouched."""
    add_crashloop(cluster)
    current = "".join(f"2025-05-12 10:00:{i:02d} \x1b[32mINFO\x1b[0m payments.api: request {i} ok\n"
                      for i in range(23))
    current += "2025-05-12 10:00:30 \x1b[31mERROR\x1b[0m payments.api: \x1b[1mwebhook secret missing\x1b[0m\n"
    assert current.count("\x1b[") == 50
    cluster.logs[("payments", CRASHING, "api", False)] = current
    cluster.logs[("payments", CRASHING, "api", True)] = current.replace("10:00:", "09:55:")
    result = gather(make_source())
    [item] = result.items
    assert "\x1b" not in item.content
    assert "INFO payments.api: request 0 ok" in item.content
    assert "ERROR payments.api: webhook secret missing" in item.content
    assert result.blobs[f"kubernetes/payments/{CRASHING}/api.log"] == current


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
    assert "403 Forbidden" in err.message
    assert "list pods in namespace 'payments'" in err.message
    assert 'cannot list resource "pods" in API group "" in the namespace "payments"' in err.message
    assert "needs 'list' on 'pods' in namespace 'payments'" in err.message
    assert TOKEN not in err.message


OTHER = "payments-api-7d9f8b6c5d-r8v4n"
FORBIDDEN_LOG = status_body(
    403, "Forbidden", f'pods "{CRASHING}" is forbidden: User "system:serviceaccount:cardloop:cardloop-worker" '
    'cannot get resource "pods/log" in API group "" in the namespace "payments"', {"name": CRASHING, "kind": "pods"})


def test_403_on_one_pods_log_keeps_its_status_and_the_other_pods_logs(cluster: FakeCluster,
                                                                      make_source: Any) -> None:
    """One pod's logs refused: its item keeps status, restarts and exit code and says why the log
    is missing; the other pod's log is read; the result is partial, with nothing to retry."""
    add_crashloop(cluster)
    add_crashloop(cluster, OTHER, restarts=4)
    cluster.fail(rf"/pods/{CRASHING}/log$", 403, FORBIDDEN_LOG)
    result = gather(make_source())

    items = {item.source: item for item in result.items}
    refused, other = items[f"k8s:payments/pod/{CRASHING}/api"], items[f"k8s:payments/pod/{OTHER}/api"]
    assert refused.title == f"{CRASHING}/api: CrashLoopBackOff, 7 restarts, last exit 1 (Error)"
    assert "Last termination: Error, exit code 1" in refused.content
    assert "Warning BackOff (x31)" in refused.content  # events were readable
    assert ("Log of the latest instance: not available (Kubernetes API forbids get pods/log "
            f"(pod {CRASHING}, container api)") in refused.content
    assert "needs 'get' on 'pods/log' in namespace 'payments'" in refused.content
    assert "ValidationError" not in refused.content
    assert other.content.count("pydantic_core._pydantic_core.ValidationError") == 2
    assert set(result.blobs) == {f"kubernetes/payments/{OTHER}/api.log",
                                 f"kubernetes/payments/{OTHER}/api.previous.log"}
    assert result.partial and result.retry is None
    assert len(result.missing) == 2  # the current and the previous instance's log
    assert all(m.startswith(f"log of pod {CRASHING}, container api") and "403 Forbidden" in m
               for m in result.missing)
    assert any("2 unhealthy" in note for note in result.notes)


def test_403_on_events_keeps_pods_and_logs_and_asks_once(cluster: FakeCluster, make_source: Any) -> None:
    """Events refused (the namespace's RBAC): every pod keeps its status, restarts, OOMKilled and
    logs, its item says the events were not read, and events are asked for once, not per pod."""
    add_oom(cluster)
    cluster.fail(r"/events$", 403, status_body(
        403, "Forbidden", 'events is forbidden: User "system:serviceaccount:cardloop:cardloop-worker" cannot '
        'list resource "events" in API group "" in the namespace "orders"', {"kind": "events"}))
    result = gather(make_source(ORDERS), repo="acme/orders")

    [item] = result.items
    assert item.title == f"{OOM_POD}/reconciler: Running, 3 restarts, OOMKilled (exit 137)"
    assert "Last termination: OOMKilled, exit code 137 (SIGKILL)" in item.content
    assert "batch 118: 1,180,000 rows in memory" in item.content
    assert "Events: not read (Kubernetes API forbids list events" in item.content
    assert "needs 'list' on 'events' in namespace 'orders'" in item.content
    assert len(cluster.requests_to("/events")) == 1
    [missing] = result.missing
    assert missing.startswith("events in namespace orders: not read: Kubernetes API forbids list events")
    assert result.retry is None and set(result.blobs) == {f"kubernetes/orders/{OOM_POD}/reconciler.log",
                                                          f"kubernetes/orders/{OOM_POD}/reconciler.previous.log"}


def test_401_with_a_wrong_token_is_final_and_never_shows_a_token(
    cluster: FakeCluster, make_source: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    wrong = "eyJhbGciOiJSUzI1NiJ9.WRONG-TOKEN-ALSO-SECRET"
    err = unavailable(make_source(token=wrong))
    assert err.retryable is False
    assert "401 Unauthorized" in err.message and "list pods in namespace 'payments'" in err.message
    assert wrong not in err.message and TOKEN not in err.message
    assert wrong not in caplog.text and TOKEN not in caplog.text


def test_429_is_retryable_after_the_servers_delay(cluster: FakeCluster, make_source: Any) -> None:
    cluster.fail(r"/pods$", 429, status_body(429, "TooManyRequests", "Too many requests, please try again later.",
                                             {"retryAfterSeconds": 7}), {"Retry-After": "7"})
    err = unavailable(make_source())
    assert err.retryable is True
    assert err.retry_after == 7.0
    assert "429" in err.message


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
    assert f"the server says {reason}" in err.message and "payments" in err.message


def test_kubelet_failure_while_reading_a_log_is_partial_and_retryable(cluster: FakeCluster,
                                                                     make_source: Any) -> None:
    add_crashloop(cluster)
    cluster.fail(r"/log$", 500, status_body(500, "InternalError", f"Get \"https://10.0.12.34:10250/containerLogs/"
                                            f"payments/{CRASHING}/api\": dial tcp 10.0.12.34:10250: i/o timeout"))
    result = gather(make_source())
    [item] = result.items
    assert "CrashLoopBackOff" in item.title and "Last termination: Error, exit code 1" in item.content
    assert "not available (Kubernetes API at" in item.content and not result.blobs
    assert result.retry is not None and result.retry.retryable
    assert "i/o timeout" in result.retry.message and "pods/log" in result.retry.message
    assert len(result.missing) == 2


def test_an_invalid_label_selector_is_final(cluster: FakeCluster, make_source: Any) -> None:
    err = unavailable(make_source({"acme/payments-api": ("payments", "app in (payments")}))
    assert err.retryable is False
    assert "unable to parse requirement" in err.message and "label selector" in err.message


def test_unreachable_cluster_fails_fast_and_retryable(make_source: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    source = make_source(url=f"http://127.0.0.1:{port}")
    started = time.monotonic()
    err = unavailable(source)
    assert time.monotonic() - started < 5
    assert err.retryable is True
    assert "unreachable" in err.message and f"127.0.0.1:{port}" in err.message
    assert "refused" in err.message.lower()


def test_a_cluster_that_never_answers_times_out(make_source: Any) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever answers
        source = make_source(url=f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5, connect_timeout=0.5)
        started = time.monotonic()
        err = unavailable(source)
    assert time.monotonic() - started < 5
    assert err.retryable is True and "no answer within 0.5 s" in err.message


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
