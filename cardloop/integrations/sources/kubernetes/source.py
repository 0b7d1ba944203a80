"""Kubernetes pod context: status, events and logs of the pods behind a card's repository.

For an error-fixing card the crash that matters is usually in a running service: a container
in CrashLoopBackOff whose previous instance died with a traceback, an OOMKilled worker, a pod
that cannot be scheduled. This source looks at the pods a repository maps to (namespace and
label selector, from config.toml) and returns, per unhealthy container, one `pod_log` item:

    title    payments-api-7d9f8b6c5d-x2k4q/api: CrashLoopBackOff, 7 restarts, last exit 1 (Error)
    content  the pod's and the container's status, the pod's newest events, then an excerpt of
             the log (prompts.logs.excerpt_log: head, tail and the lines around the errors) of
             the previous instance (the one that crashed) and of the current one
    blobs    kubernetes/<ns>/<pod>/<container>[.previous].log, the fetched log whole

Healthy pods only appear as one line in `notes`: the agent needs to know they were looked at,
not what they logged.

Only the pod listing failing fails the source. A pod's log or events that cannot be read (403
for want of `get pods/log` or `list events`, a 5xx) cost that part alone: the item keeps the
pod's status, restarts and exit codes and says which part is missing and why, the other pods
keep theirs, and the result is partial (base.py: `missing`, and `retry` for a failure that
retrying may fix). A 403 on events is the namespace's RBAC, the same for every pod: asked once.

Why the real `kubernetes` client with an ApiClient of our own: the client's global default
configuration is process-wide state; two sources (two clusters, or a test next to a worker)
must never share credentials or hosts, so every source deep-copies the configuration it is
given and never calls a loader without `client_configuration`. Retries are off in the client
(urllib3 and client-go style): Temporal owns retries, so every failure surfaces here once and
is classified (UpstreamError: 401/403/404 and other 4xx are final, 429/5xx/timeouts and an
unreachable cluster retry, honouring Retry-After). Every request carries a connect and a read
timeout so an unreachable cluster fails within seconds instead of the OS's minutes.

Credentials never leave the configuration: error reasons are built from the API server's
Status message and the host (without any userinfo), never from the configuration or the
request headers, and nothing here logs.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from cardloop.integrations.sources.base import SourceRequest, SourceResult, default_counter
from cardloop.integrations.sources.kubernetes.errors import (
    Call,
    api_error,
    connection_error,
    one_line,
    safe_host,
    status_message,
)
from cardloop.integrations.sources.kubernetes.logs import PodLog, log_sections, read_tail, split_budget
from cardloop.integrations.sources.kubernetes.pods import (
    Pod,
    PodSelector,
    aware,
    container_lines,
    container_title,
    distinct,
    event_count,
    event_lines,
    event_time,
    judge,
    last_terminated,
    pod_lines,
    started,
    statuses,
)
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.logs import Counter

NAME = "kubernetes"

# One page of pods: a selector matching more than this is a misconfiguration, not a service.
POD_LIST_LIMIT = 500
# A waiting container in these states is on its way up, not failing (on its own).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


def _selectors(services: Mapping[str, tuple[str, str] | PodSelector]) -> dict[str, PodSelector]:
    """Validated at construction, so a typo in config.toml fails the worker at start-up."""
    out: dict[str, PodSelector] = {}
    for repo, value in services.items():
        target = value if isinstance(value, PodSelector) else PodSelector(*value)
        if not _NAMESPACE.match(target.namespace):
            raise ValueError(f"kubernetes source: repo {repo!r}: {target.namespace!r} is not a namespace name")
        if not target.selector.strip():
            # An empty selector would read every pod in the namespace: say which ones instead.
            raise ValueError(f"kubernetes source: repo {repo!r}: the label selector is empty")
        # GitHub treats owner/name case-insensitively, and so do cards written by hand.
        out[repo.lower()] = target
    return out


# --- the source ----------------------------------------------------------------------------


@dataclass
class _Found:
    items: list[ContextItem] = field(default_factory=list)
    blobs: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    retry: UpstreamError | None = None

    def failed(self, what: str, err: UpstreamError) -> None:
        """`what` was not read: the result is partial (module docstring)."""
        self.missing.append(f"{what}: not read: {err.message}")
        if err.retryable and self.retry is None:
            self.retry = err


class KubernetesSource:
    """Pod status, events and logs for a card's repository (see the module docstring).

    `services` maps "owner/name" to (namespace, label selector). `configuration` is a
    kubernetes.client.Configuration (deep-copied: the caller's object and the client's global
    default are never touched); `in_cluster`, `from_kubeconfig` and `connect` build one.
    """

    name = NAME

    def __init__(
        self,
        services: Mapping[str, tuple[str, str] | PodSelector],
        configuration: k8s.Configuration,
        *,
        count: Counter | None = None,
        excerpt_tokens: int = 3_000,
        tail_lines: int = 300,
        since_seconds: int | None = 86_400,
        max_events: int = 10,
        warning_window: float = 3_600.0,
        max_pods: int = 5,
        max_pods_checked: int = 30,
        max_log_bytes: int = 1 << 20,
        timeout: float = 15.0,
        connect_timeout: float = 3.0,
    ) -> None:
        if excerpt_tokens < 1 or tail_lines < 1 or max_events < 0 or max_pods < 1 or max_log_bytes < 1024:
            raise ValueError("kubernetes source: excerpt_tokens, tail_lines, max_pods >= 1, max_log_bytes >= 1024")
        self._services = _selectors(services)
        self._count = count or default_counter()
        self.excerpt_tokens = excerpt_tokens
        # The client validates parameter types strictly: a float from config would fail every call.
        self.tail_lines = int(tail_lines)
        self.since_seconds = int(since_seconds) if since_seconds else None
        self.max_events = max_events
        self.warning_window = warning_window
        self.max_pods = max_pods
        self.max_pods_checked = max(max_pods, max_pods_checked)
        self.max_log_bytes = max_log_bytes
        # (connect, read): a blackholed address fails after `connect_timeout`, not minutes.
        self._timeouts = (min(connect_timeout, timeout), timeout)
        configuration = copy.deepcopy(configuration)
        configuration.retries = False  # urllib3: no silent retries; Temporal owns retries
        configuration.client_go_retries = False  # the client's own Retry-After loop, likewise
        self._host = safe_host(str(configuration.host))
        self._api_client = k8s.ApiClient(configuration)
        self._core = k8s.CoreV1Api(self._api_client)

    # -- construction from the cluster's usual places ---------------------------------------

    @classmethod
    def in_cluster(cls, services: Mapping[str, tuple[str, str] | PodSelector], **options: Any) -> KubernetesSource:
        """The pod's service account (token, CA and the KUBERNETES_SERVICE_* address)."""
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        return cls(services, configuration, **options)

    @classmethod
    def from_kubeconfig(
        cls,
        services: Mapping[str, tuple[str, str] | PodSelector],
        *,
        config_file: str | os.PathLike[str] | None = None,
        context: str | None = None,
        **options: Any,
    ) -> KubernetesSource:
        """A kubeconfig file (default: $KUBECONFIG or ~/.kube/config) and context (default: its
        current one). persist_config=False: a worker never rewrites an operator's kubeconfig."""
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(
            config_file=os.fspath(config_file) if config_file else None,
            context=context or None,
            client_configuration=configuration,
            persist_config=False,
        )
        return cls(services, configuration, **options)

    @classmethod
    def connect(
        cls,
        services: Mapping[str, tuple[str, str] | PodSelector],
        *,
        kubeconfig: str = "",
        context: str = "",
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> KubernetesSource:
        """config.toml's rule: a kubeconfig or context named -> that kubeconfig; else in-cluster
        when running in a pod (KUBERNETES_SERVICE_HOST is set); else the default kubeconfig."""
        env = os.environ if environ is None else environ
        if not kubeconfig and not context and env.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(services, **options)
        return cls.from_kubeconfig(
            services, config_file=os.path.expanduser(kubeconfig) if kubeconfig else None, context=context, **options
        )

    @property
    def host(self) -> str:
        return self._host

    def close(self) -> None:
        self._api_client.close()

    def __enter__(self) -> KubernetesSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubernetesSource(host={self._host!r}, repos={sorted(self._services)!r})"

    # -- gathering --------------------------------------------------------------------------

    def probe(self) -> tuple[list[str], list[str]]:
        """Whether this account may make each request `gather` makes (`cardloop doctor`), per
        configured service: list pods, list events, get pods/log (the log of a listed pod: with
        no pod matching, it cannot be asked without a pod's name). Returns (problems, unchecked):
        one line per request refused or failed, naming the RBAC verb and resource and the API's
        reason; one line per permission it could not check."""
        problems: list[str] = []
        unchecked: list[str] = []
        for repo, target in sorted(self._services.items()):
            ns = target.namespace
            try:
                listing = self._core.list_namespaced_pod(ns, label_selector=target.selector, limit=1,
                                                         _request_timeout=self._timeouts)
            except k8s.ApiException as exc:
                problems.append(f"{repo}: listing pods in {ns} answered {exc.status} {exc.reason}"
                                + self._grant(exc, "list", "pods"))
                continue
            except Exception as exc:  # unreachable API server, TLS trouble: name it, never raise
                problems.append(f"{repo}: {self._host} did not answer ({type(exc).__name__})")
                continue
            try:
                self._core.list_namespaced_event(ns, limit=1, _request_timeout=self._timeouts)
            except k8s.ApiException as exc:
                problems.append(f"{repo}: listing events in {ns} answered {exc.status} {exc.reason}"
                                + self._grant(exc, "list", "events"))
            except Exception as exc:
                problems.append(f"{repo}: listing events in {ns}: {self._host} did not answer ({type(exc).__name__})")
            pods = list(listing.items or [])
            containers = (pods[0].spec.containers or []) if pods and pods[0].spec else []
            if not containers:
                unchecked.append(f"{repo}: get pods/log in {ns} (no pod matches {target.selector})")
                continue
            name = str(pods[0].metadata.name)
            try:
                response = self._core.read_namespaced_pod_log(
                    name, ns, container=containers[0].name, tail_lines=1, limit_bytes=1024,
                    _preload_content=False, _request_timeout=self._timeouts)
                try:
                    response.read()  # at most limit_bytes: the connection goes back to the pool clean
                finally:
                    response.release_conn()
            except k8s.ApiException as exc:
                # 400 (the container is waiting, no previous instance) and 404 (the pod went away)
                # are about that pod, not about the permission, which let the request through.
                if exc.status not in (400, 404):
                    problems.append(f"{repo}: reading the log of pod {name} in {ns} answered {exc.status} "
                                    f"{exc.reason}" + self._grant(exc, "get", "pods/log"))
            except Exception as exc:
                problems.append(f"{repo}: reading the log of pod {name} in {ns}: {self._host} did not answer "
                                f"({type(exc).__name__})")
        return problems, unchecked

    @staticmethod
    def _grant(exc: k8s.ApiException, verb: str, resource: str) -> str:
        if exc.status == 403:
            return f": the worker needs '{verb}' on '{resource}' (deploy/k8s/pod-reader)"
        return ""

    def gather(self, request: SourceRequest) -> SourceResult:
        card = request.card
        if not card.repo:
            return SourceResult(NAME, notes=(f"kubernetes: card {card.id} names no repository; no pods looked at",))
        target = self._services.get(card.repo.lower())
        if target is None:
            return SourceResult(
                NAME,
                notes=(f"kubernetes: no pods are mapped to {card.repo} "
                       "([sources.kubernetes.services] in config.toml); no pods looked at",),
            )
        found = _Found()
        self._gather(target, found)
        return SourceResult(NAME, tuple(found.items), found.blobs, tuple(found.notes),
                            missing=tuple(found.missing), retry=found.retry)

    @contextmanager
    def _guard(self, call: Call) -> Iterator[None]:
        """Every API failure leaves as UpstreamError, classified (module docstring)."""
        try:
            yield
        except ApiException as exc:
            raise api_error(exc, call, self._host) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise connection_error(exc, call, self._host, self._timeouts) from exc
        except ValueError as exc:  # a body that does not parse as the object it should be
            raise UpstreamError(
                f"Kubernetes API at {self._host} answered {call} with something that is not a valid "
                f"Kubernetes object: {one_line(str(exc), 300)}",
                kind="bad_response", retryable=True,
            ) from exc

    def _gather(self, target: PodSelector, found: _Found) -> None:
        ns = target.namespace
        with self._guard(Call("list", "pods", ns)):
            listing = self._core.list_namespaced_pod(
                ns, label_selector=target.selector, limit=POD_LIST_LIMIT, _request_timeout=self._timeouts
            )
        pods = list(listing.items or [])
        where = f"kubernetes: namespace {ns}, selector {target.selector}"
        if not pods:
            found.notes.append(f"{where}: no pods match")
            return
        if listing.metadata and listing.metadata.var_continue:
            found.notes.append(f"{where}: more than {POD_LIST_LIMIT} pods match; only the first "
                               f"{POD_LIST_LIMIT} were looked at")
        since = datetime.now(UTC) - timedelta(seconds=self.warning_window)
        # Events cost one request per pod: spend them on the pods that already look worst.
        first = sorted(pods, key=lambda p: (-judge(p, [], since).severity, str(p.metadata.name)))
        checked: list[Pod] = []
        forbidden: UpstreamError | None = None  # events refused for good: the same for every pod
        for p in first[: self.max_pods_checked]:
            name = str(p.metadata.name)
            events: list[Any] = []
            unread = forbidden
            if unread is None:
                try:
                    events = self._events(ns, name)
                except UpstreamError as err:
                    unread = err
                    if err.retryable:
                        found.failed(f"events of pod {name}", err)
                    else:
                        forbidden = err
                        found.failed(f"events in namespace {ns}", err)
            view = judge(p, events, since)
            view.events_missing = unread.message if unread is not None else None
            checked.append(view)
        unhealthy = sorted((p for p in checked if p.unhealthy),
                           key=lambda p: (-p.severity, -p.when().timestamp(), p.name))
        healthy = [p for p in checked if not p.unhealthy]
        for view in unhealthy[: self.max_pods]:
            self._report(view, target, found)

        summary = f"{where}: {len(pods)} pod{'' if len(pods) == 1 else 's'}"
        if unhealthy:
            summary += f", {len(unhealthy)} unhealthy: " + "; ".join(p.summary() for p in unhealthy[: self.max_pods])
            if len(unhealthy) > self.max_pods:
                rest = unhealthy[self.max_pods :]
                summary += f"; {len(rest)} more unhealthy, not detailed: " + ", ".join(p.name for p in rest[:10])
                summary += ", ..." if len(rest) > 10 else ""
        found.notes.append(summary)
        if healthy:
            names = ", ".join(p.name for p in healthy[:5])
            names += f" and {len(healthy) - 5} more" if len(healthy) > 5 else ""
            found.notes.append(f"{where}: {len(healthy)} healthy (running and ready or completed, no restarts, "
                               f"no recent warnings): {names}")
        if len(pods) > len(checked):
            found.notes.append(f"{where}: {len(pods) - len(checked)} pods not examined "
                               f"(max_pods_checked={self.max_pods_checked})")

    def _events(self, ns: str, pod: str) -> list[Any]:
        call = Call("list", "events", ns, f" for pod {pod}")
        with self._guard(call):
            listing = self._core.list_namespaced_event(
                ns, field_selector=f"involvedObject.name={pod}", _request_timeout=self._timeouts
            )
        # involvedObject.name alone also matches a ReplicaSet or Service that shares the name.
        events = [e for e in listing.items or [] if (e.involved_object.kind or "Pod") == "Pod"]
        epoch = datetime.min.replace(tzinfo=UTC)
        return sorted(events, key=lambda e: event_time(e) or epoch, reverse=True)

    def _read_log(self, ns: str, pod: str, container: str, *, previous: bool, running: bool,
                  found: _Found) -> PodLog:
        """The log, or a PodLog saying why there is none: a failure to read it is recorded in
        `found` (the result is partial), never raised."""
        suffix = ".previous" if previous else ""
        blob = f"kubernetes/{ns}/{pod}/{container}{suffix}.log"
        label = ("Log of the previous instance, before the last restart" if previous
                 else "Log of the running instance" if running
                 else "Log of the latest instance")
        try:
            return self._fetch_log(ns, pod, container, previous=previous, running=running, label=label, blob=blob)
        except UpstreamError as err:
            found.failed(f"log of pod {pod}, container {container}{' (previous instance)' if previous else ''}",
                         err)
            return PodLog(label, blob, missing=err.message)

    def _fetch_log(self, ns: str, pod: str, container: str, *, previous: bool, running: bool, label: str,
                   blob: str) -> PodLog:
        options: dict[str, Any] = {"container": container, "tail_lines": self.tail_lines, "timestamps": False}
        if previous:
            options["previous"] = True
        # Only a running instance's log keeps growing; a finished one ends with its crash, which
        # a time window could cut away if it happened longer ago than the window.
        elif running and self.since_seconds:
            options["since_seconds"] = self.since_seconds
        with self._guard(Call("get", "pods/log", ns, f" (pod {pod}, container {container})")):
            try:
                response = self._core.read_namespaced_pod_log(
                    pod, ns, _preload_content=False, _request_timeout=self._timeouts, **options
                )
            except ApiException as exc:
                # 400: no such instance ("previous terminated container ... not found", "is
                # waiting to start"); 404: the pod went away since the listing. Neither is the
                # source failing: the item says the log is missing and why.
                if exc.status in (400, 404):
                    return PodLog(label, blob, missing=status_message(exc))
                raise
            try:
                text, dropped = read_tail(response, self.max_log_bytes)
            except BaseException:
                response.close()  # half-read: the connection must not go back to the pool
                raise
            finally:
                response.release_conn()
        return PodLog(label, blob, text=text, dropped_bytes=dropped)

    def _report(self, view: Pod, target: PodSelector, found: _Found) -> None:
        ns = target.namespace
        pod_text = pod_lines(view, target)
        event_text = event_lines(view, self.max_events)
        if not view.containers:
            # Unhealthy as a pod (unschedulable, not ready, warnings) with no failing container:
            # one item for the pod, with the current logs of whatever containers run.
            containers = statuses(view.pod)
            logs = [self._read_log(ns, view.name, cs.name, previous=False, running=bool(cs.state and cs.state.running),
                                   found=found)
                    for cs, _init in containers if started(cs)]
            lines = [*pod_text]
            for cs, init in containers:
                lines += container_lines(view.pod, cs, init)
            budget = self.excerpt_tokens // max(1, len(logs))
            content = "\n".join([*lines, *event_text, *self._log_sections(logs, [budget] * len(logs), found)])
            extra = [f"Warning {e.reason} (x{event_count(e)})" for e in distinct(view.warnings)[:2]]
            title = f"{view.name}: {', '.join([*view.problems, *extra]) or 'unhealthy'}"
            found.items.append(ContextItem(kind=ContextKind.POD_LOG, source=f"k8s:{ns}/pod/{view.name}",
                                           title=title[:500], content=content, created_at=view.when()))
            return
        for cs, init, _trouble in view.containers:
            running = bool(cs.state and cs.state.running)
            current = (self._read_log(ns, view.name, cs.name, previous=False, running=running, found=found)
                       if started(cs)
                       else PodLog("Log", "", missing="the container has not started, so it has no log yet"))
            logs = [current]
            if cs.restart_count or last_terminated(cs):
                previous = self._read_log(ns, view.name, cs.name, previous=True, running=False, found=found)
                if previous.text is not None and previous.text == current.text:
                    # The kubelet keeps the last two instances; a deterministic crash logs the
                    # same twice. One copy, the whole budget.
                    current.label += " (the previous instance logged exactly the same)"
                else:
                    logs.insert(0, previous)
            budgets = split_budget(logs, self.excerpt_tokens, crash_first=running)
            content = "\n".join([*pod_text, *container_lines(view.pod, cs, init), *event_text,
                                 *self._log_sections(logs, budgets, found)])
            last = last_terminated(cs)
            created = aware(last.finished_at) if last and last.finished_at else None
            if created is None and cs.state and cs.state.terminated:
                created = aware(cs.state.terminated.finished_at)
            found.items.append(ContextItem(
                kind=ContextKind.POD_LOG,
                source=f"k8s:{ns}/pod/{view.name}/{cs.name}",
                title=container_title(view.name, cs, init)[:500],
                content=content,
                created_at=created or view.when(),
            ))

    def _log_sections(self, logs: list[PodLog], budgets: list[int], found: _Found) -> list[str]:
        for log in logs:
            if log.text and log.text.strip():
                found.blobs[log.blob] = log.text
        return log_sections(logs, budgets, self._count, tail_lines=self.tail_lines, max_log_bytes=self.max_log_bytes)
