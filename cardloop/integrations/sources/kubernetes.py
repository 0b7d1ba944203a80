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

Why the real `kubernetes` client with an ApiClient of our own: the client's global default
configuration is process-wide state; two sources (two clusters, or a test next to a worker)
must never share credentials or hosts, so every source deep-copies the configuration it is
given and never calls a loader without `client_configuration`. Retries are off in the client
(urllib3 and client-go style): Temporal owns retries, so every failure surfaces here once and
is classified (SourceUnavailable: 401/403/404 and other 4xx are final, 429/5xx/timeouts and an
unreachable cluster retry, honouring Retry-After). Every request carries a connect and a read
timeout so an unreachable cluster fails within seconds instead of the OS's minutes.

Credentials never leave the configuration: error reasons are built from the API server's
Status message and the host (without any userinfo), never from the configuration or the
request headers, and nothing here logs.
"""

from __future__ import annotations

import copy
import email.utils
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from cardloop.integrations.sources.base import SourceRequest, SourceResult, SourceUnavailable
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.logs import Counter, excerpt_log

NAME = "kubernetes"

# Past ten minutes a Temporal retry with its own backoff serves better than obeying the hint.
MAX_RETRY_AFTER = 600.0
# One page of pods: a selector matching more than this is a misconfiguration, not a service.
POD_LIST_LIMIT = 500
# A waiting container in these states is on its way up, not failing (on its own).
_STARTING = frozenset({"ContainerCreating", "PodInitializing"})
# Linux signal numbers (the container's OS, not the worker's): exit code 128+n means signal n.
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
            9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_MESSAGE_CHARS = 500  # a Status or termination message is a hint, not a log


@dataclass(frozen=True)
class PodSelector:
    """Where a repository's service runs: a namespace and a label selector."""

    namespace: str
    selector: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.selector}"


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


# --- errors --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """One API request, as an RBAC rule names it: for error messages that say what to grant."""

    verb: str
    resource: str
    namespace: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}{self.detail} in namespace {self.namespace!r}"


def _one_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _status(exc: ApiException) -> dict[str, Any]:
    """The Kubernetes Status object in an error's body, or {} (a proxy's HTML page, say)."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) and data.get("kind") == "Status" else {}


def _message(exc: ApiException) -> str:
    message = _status(exc).get("message")
    if isinstance(message, str) and message:
        return _one_line(message)
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else exc.body
    return _one_line(body or exc.reason or "no message", 300)


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name:
            return str(value)
    return None


def _retry_after(exc: ApiException, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: Retry-After (seconds or an HTTP date), else the
    Status's details.retryAfterSeconds (the API server sends both on 429 and some 5xx)."""
    seconds: float | None = None
    value = _header(exc.headers, "retry-after")
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
                seconds = when.timestamp() - (time.time() if now is None else now)
            except (TypeError, ValueError):
                seconds = None
    if seconds is None:
        details = _status(exc).get("details")
        hint = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        if isinstance(hint, int | float):
            seconds = float(hint)
    if seconds is None or seconds != seconds:  # NaN from a garbled header
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _api_error(exc: ApiException, call: _Call, host: str) -> SourceUnavailable:
    status = int(exc.status or 0)
    message = _message(exc)
    if status == 0:
        # The client raises status 0 for TLS failures. A certificate that does not verify will
        # not verify on the next attempt either; an EOF mid-handshake might.
        text = str(exc.reason or "")
        final = "certificate verify failed" in text.lower()
        return SourceUnavailable(
            f"Kubernetes API at {host}: TLS or client error while trying to {call}: {_one_line(text, 300)}"
            + (" (check the cluster's CA certificate in the kubeconfig)" if final else ""),
            retryable=not final,
        )
    if status == 401:
        return SourceUnavailable(
            f"Kubernetes API at {host} rejected the credentials (401 Unauthorized) while trying to {call}: "
            f"{message}. The token is missing, expired or revoked: check the kubeconfig context or the "
            "worker's service account token.",
            retryable=False,
        )
    if status == 403:
        return SourceUnavailable(
            f"Kubernetes API forbids {call} (403 Forbidden): {message}. The worker's identity needs "
            f"'{call.verb}' on '{call.resource}' in namespace {call.namespace!r} (deploy/k8s/pod-reader).",
            retryable=False,
        )
    if status == 404:
        return SourceUnavailable(
            f"Kubernetes API at {host} answered 404 Not Found to {call}: {message}. Check the API server "
            f"address and that namespace {call.namespace!r} exists.",
            retryable=False,
        )
    if status == 429 or status == 408 or status == 409 or status >= 500:
        return SourceUnavailable(
            f"Kubernetes API at {host} answered {status} {exc.reason or ''} to {call}: {message}".replace(" :", ":"),
            retryable=True,
            retry_after=_retry_after(exc),
        )
    hint = " (is the label selector valid?)" if status == 400 and call.resource == "pods" else ""
    return SourceUnavailable(
        f"Kubernetes API refused {call} ({status} {exc.reason or ''}): {message}{hint}".replace(" )", ")"),
        retryable=False,
    )


def _connection_error(exc: BaseException, call: _Call, host: str, timeouts: tuple[float, float]) -> SourceUnavailable:
    # NewConnectionError subclasses ConnectTimeoutError in urllib3, though "refused" is no timeout.
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
        exc, urllib3.exceptions.NewConnectionError
    ):
        why = f"no connection within {timeouts[0]:g} s"
    elif isinstance(exc, urllib3.exceptions.ReadTimeoutError | TimeoutError):
        why = f"no answer within {timeouts[1]:g} s"
    else:
        # urllib3 puts the connection object's repr before the OS error; keep the OS error.
        text = str(getattr(exc, "reason", None) or exc)
        why = f"{type(exc).__name__}: {text.rsplit('>: ', 1)[-1]}"
    return SourceUnavailable(
        f"Kubernetes API at {host} is unreachable (while trying to {call}): {_one_line(why, 300)}",
        retryable=True,
    )


def _safe_host(url: str) -> str:
    """The API server URL without userinfo, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


# --- reading pod status --------------------------------------------------------------------


def _aware(when: datetime | None) -> datetime | None:
    if when is None:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _ts(when: datetime | None) -> str:
    when = _aware(when)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else "?"


def _event_time(event: Any) -> datetime | None:
    series = event.series
    return _aware(
        event.last_timestamp
        or (series.last_observed_time if series else None)
        or event.event_time
        or event.first_timestamp
        or event.metadata.creation_timestamp
    )


def _event_count(event: Any) -> int:
    if event.series and event.series.count:
        return event.series.count
    return event.count or 1


def _signal(terminated: Any) -> str:
    number = terminated.signal or (terminated.exit_code - 128 if 128 < terminated.exit_code < 160 else None)
    return f" ({_SIGNALS.get(number, f'signal {number}')})" if number else ""


def _termination(terminated: Any, *, last: bool) -> str:
    """The title's words for how an instance ended: "OOMKilled (exit 137)", "last exit 1 (Error)"."""
    if terminated.reason == "OOMKilled":
        return f"OOMKilled (exit {terminated.exit_code})"
    reason = f" ({terminated.reason})" if terminated.reason else ""
    return f"{'last exit' if last else 'exited'} {terminated.exit_code}{reason}"


def _terminated_text(terminated: Any) -> str:
    text = f"{terminated.reason or 'Terminated'}, exit code {terminated.exit_code}{_signal(terminated)}"
    if terminated.started_at:
        text += f", started {_ts(terminated.started_at)}"
    if terminated.finished_at:
        text += f", finished {_ts(terminated.finished_at)}"
    if terminated.message:
        text += f"; message: {_one_line(terminated.message)}"
    return text


def _state_text(state: Any) -> str:
    if state is None:
        return "unknown"
    if state.waiting:
        message = f": {_one_line(state.waiting.message)}" if state.waiting.message else ""
        return f"waiting, {state.waiting.reason or 'no reason given'}{message}"
    if state.running:
        return f"running since {_ts(state.running.started_at)}"
    if state.terminated:
        return "terminated, " + _terminated_text(state.terminated)
    return "unknown"


def _last_terminated(cs: Any) -> Any:
    return cs.last_state.terminated if cs.last_state else None


def _started(cs: Any) -> bool:
    """Whether an instance of the container ever ran, so that a log may exist."""
    state = cs.state
    return bool((state and (state.running or state.terminated)) or _last_terminated(cs) or cs.restart_count)


def _container_trouble(cs: Any, *, init: bool, phase: str) -> int:
    """How bad one container looks on its own, 0 (fine) to 3 (failing now)."""
    state = cs.state
    if state and state.waiting and state.waiting.reason and state.waiting.reason not in _STARTING:
        return 3  # CrashLoopBackOff, ImagePullBackOff, CreateContainerConfigError, ...
    if state and state.terminated and state.terminated.exit_code != 0:
        return 3
    if cs.restart_count > 0:
        return 2 if cs.ready else 3
    if init or phase == "Succeeded" or (state and state.terminated):
        return 0  # a finished init container or job step is done, not unready
    if state and state.waiting:
        return 0  # still starting: the pod's phase and events say whether it is stuck
    return 0 if cs.ready else 2


@dataclass
class _Pod:
    """One pod as this source judges it."""

    pod: Any
    events: list[Any]  # newest first
    warnings: list[Any]  # Warning events within the window, newest first
    problems: list[str]  # pod-level: "Pending (Unschedulable)", "not ready"
    containers: list[tuple[Any, bool, int]]  # (status, is_init, trouble) of troubled containers
    severity: int

    @property
    def name(self) -> str:
        return str(self.pod.metadata.name)

    @property
    def unhealthy(self) -> bool:
        return self.severity > 0

    def when(self) -> datetime:
        """When it last went wrong: for ordering pods and dating pod-level items."""
        times = [_event_time(e) for e in self.events[:1]]
        for cs, _init, _trouble in self.containers:
            last = _last_terminated(cs)
            times.append(_aware(last.finished_at) if last else None)
        status = self.pod.status
        times.append(_aware(status.start_time) if status else None)
        times.append(_aware(self.pod.metadata.creation_timestamp))
        known = [t for t in times if t]
        return max(known) if known else datetime.now(UTC)

    def summary(self) -> str:
        words: list[str] = []
        for cs, _init, _trouble in self.containers:
            state = cs.state
            if state and state.waiting and state.waiting.reason and state.waiting.reason not in _STARTING:
                words.append(f"{cs.name} {state.waiting.reason}")
            elif _last_terminated(cs) and _last_terminated(cs).reason == "OOMKilled":
                words.append(f"{cs.name} OOMKilled")
            elif cs.restart_count:
                words.append(f"{cs.name} {cs.restart_count} restarts")
        # "not ready" says nothing more once a container says why; Pending or Failed does.
        words = [p for p in self.problems if p != "not ready" or not words] + words
        if not words and self.warnings:
            words.append(f"Warning {self.warnings[0].reason}")
        return f"{self.name} ({', '.join(dict.fromkeys(words)) or 'unhealthy'})"


def _statuses(pod: Any) -> list[tuple[Any, bool]]:
    """(container status, is init container), init containers first as they run first."""
    status = pod.status
    if status is None:
        return []
    return [*((cs, True) for cs in status.init_container_statuses or []),
            *((cs, False) for cs in status.container_statuses or [])]


def _pod_ready(pod: Any) -> bool:
    for condition in (pod.status.conditions or []) if pod.status else []:
        if condition.type == "Ready":
            return condition.status == "True"
    return False


def _judge(pod: Any, events: list[Any], since: datetime) -> _Pod:
    status = pod.status
    phase = (status.phase if status else None) or "Unknown"
    problems: list[str] = []
    severity = 0
    if phase in ("Pending", "Failed", "Unknown"):
        problems.append(f"{phase} ({status.reason})" if status and status.reason else phase)
        severity = 3 if phase == "Failed" else 2
    elif phase == "Running" and not _pod_ready(pod):
        problems.append("not ready")
        severity = 2
    containers: list[tuple[Any, bool, int]] = []
    for cs, init in _statuses(pod):
        trouble = _container_trouble(cs, init=init, phase=phase)
        if trouble:
            containers.append((cs, init, trouble))
            severity = max(severity, trouble)
    warnings = [e for e in events if e.type == "Warning" and (_event_time(e) or since) >= since]
    if warnings:
        severity = max(severity, 1)
    return _Pod(pod, events, warnings, problems, containers, severity)


# --- logs ----------------------------------------------------------------------------------


@dataclass
class _Log:
    """One fetched log, or why there is none."""

    label: str
    blob: str
    text: str | None = None
    missing: str | None = None
    dropped_bytes: int = 0


def _read_tail(response: Any, max_bytes: int) -> tuple[str, int]:
    """The last `max_bytes` of a streamed body, cut at a line start, and how many bytes went.

    Why stream: `tail_lines` bounds lines, not bytes; one runaway line (a JSON dump, a minified
    bundle) could otherwise pull gigabytes into the worker. The tail is where a crash is."""
    buf = bytearray()
    dropped = 0
    for chunk in response.stream(64 * 1024, decode_content=True):
        buf += chunk
        if len(buf) > 2 * max_bytes:  # trim in batches, not per chunk
            dropped += len(buf) - max_bytes
            del buf[: len(buf) - max_bytes]
    if len(buf) > max_bytes:
        dropped += len(buf) - max_bytes
        del buf[: len(buf) - max_bytes]
    if dropped:
        newline = buf.find(b"\n")
        if 0 <= newline < len(buf) - 1:  # drop the partial first line (and a split UTF-8 char)
            dropped += newline + 1
            del buf[: newline + 1]
    return bytes(buf).decode("utf-8", "replace"), dropped


# --- the source ----------------------------------------------------------------------------


@dataclass
class _Found:
    items: list[ContextItem] = field(default_factory=list)
    blobs: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


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
        if count is None:
            from cardloop.prompts.tokens import TokenCounter

            count = TokenCounter("cl100k_base").count
        self._count = count
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
        self._host = _safe_host(str(configuration.host))
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
        return SourceResult(NAME, tuple(found.items), found.blobs, tuple(found.notes))

    @contextmanager
    def _guard(self, call: _Call) -> Iterator[None]:
        """Every API failure leaves as SourceUnavailable, classified (module docstring)."""
        try:
            yield
        except ApiException as exc:
            raise _api_error(exc, call, self._host) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _connection_error(exc, call, self._host, self._timeouts) from exc
        except ValueError as exc:  # a body that does not parse as the object it should be
            raise SourceUnavailable(
                f"Kubernetes API at {self._host} answered {call} with something that is not a valid "
                f"Kubernetes object: {_one_line(str(exc), 300)}",
                retryable=True,
            ) from exc

    def _gather(self, target: PodSelector, found: _Found) -> None:
        ns = target.namespace
        with self._guard(_Call("list", "pods", ns)):
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
        first = sorted(pods, key=lambda p: (-_judge(p, [], since).severity, str(p.metadata.name)))
        checked = [_judge(p, self._events(ns, str(p.metadata.name)), since) for p in first[: self.max_pods_checked]]
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
        call = _Call("list", "events", ns, f" for pod {pod}")
        with self._guard(call):
            listing = self._core.list_namespaced_event(
                ns, field_selector=f"involvedObject.name={pod}", _request_timeout=self._timeouts
            )
        # involvedObject.name alone also matches a ReplicaSet or Service that shares the name.
        events = [e for e in listing.items or [] if (e.involved_object.kind or "Pod") == "Pod"]
        epoch = datetime.min.replace(tzinfo=UTC)
        return sorted(events, key=lambda e: _event_time(e) or epoch, reverse=True)

    def _read_log(self, ns: str, pod: str, container: str, *, previous: bool, running: bool) -> _Log:
        suffix = ".previous" if previous else ""
        blob = f"kubernetes/{ns}/{pod}/{container}{suffix}.log"
        label = ("Log of the previous instance, before the last restart" if previous
                 else "Log of the running instance" if running
                 else "Log of the latest instance")
        options: dict[str, Any] = {"container": container, "tail_lines": self.tail_lines, "timestamps": False}
        if previous:
            options["previous"] = True
        # Only a running instance's log keeps growing; a finished one ends with its crash, which
        # a time window could cut away if it happened longer ago than the window.
        elif running and self.since_seconds:
            options["since_seconds"] = self.since_seconds
        with self._guard(_Call("get", "pods/log", ns, f" (pod {pod}, container {container})")):
            try:
                response = self._core.read_namespaced_pod_log(
                    pod, ns, _preload_content=False, _request_timeout=self._timeouts, **options
                )
            except ApiException as exc:
                # 400: no such instance ("previous terminated container ... not found", "is
                # waiting to start"); 404: the pod went away since the listing. Neither is the
                # source failing: the item says the log is missing and why.
                if exc.status in (400, 404):
                    return _Log(label, blob, missing=_message(exc))
                raise
            try:
                text, dropped = _read_tail(response, self.max_log_bytes)
            except BaseException:
                response.close()  # half-read: the connection must not go back to the pool
                raise
            finally:
                response.release_conn()
        return _Log(label, blob, text=text, dropped_bytes=dropped)

    def _report(self, view: _Pod, target: PodSelector, found: _Found) -> None:
        ns = target.namespace
        pod_lines = self._pod_lines(view, target)
        event_lines = self._event_lines(view)
        if not view.containers:
            # Unhealthy as a pod (unschedulable, not ready, warnings) with no failing container:
            # one item for the pod, with the current logs of whatever containers run.
            statuses = _statuses(view.pod)
            logs = [self._read_log(ns, view.name, cs.name, previous=False, running=bool(cs.state and cs.state.running))
                    for cs, _init in statuses if _started(cs)]
            lines = [*pod_lines]
            for cs, init in statuses:
                lines += self._container_lines(view.pod, cs, init)
            budget = self.excerpt_tokens // max(1, len(logs))
            content = "\n".join([*lines, *event_lines, *self._log_sections(logs, [budget] * len(logs), found)])
            extra = [f"Warning {e.reason} (x{_event_count(e)})" for e in _distinct(view.warnings)[:2]]
            title = f"{view.name}: {', '.join([*view.problems, *extra]) or 'unhealthy'}"
            found.items.append(ContextItem(kind=ContextKind.POD_LOG, source=f"k8s:{ns}/pod/{view.name}",
                                           title=title[:500], content=content, created_at=view.when()))
            return
        for cs, init, _trouble in view.containers:
            running = bool(cs.state and cs.state.running)
            current = (self._read_log(ns, view.name, cs.name, previous=False, running=running) if _started(cs)
                       else _Log("Log", "", missing="the container has not started, so it has no log yet"))
            logs = [current]
            if cs.restart_count or _last_terminated(cs):
                previous = self._read_log(ns, view.name, cs.name, previous=True, running=False)
                if previous.text is not None and previous.text == current.text:
                    # The kubelet keeps the last two instances; a deterministic crash logs the
                    # same twice. One copy, the whole budget.
                    current.label += " (the previous instance logged exactly the same)"
                else:
                    logs.insert(0, previous)
            budgets = self._split(logs, crash_first=running)
            content = "\n".join([*pod_lines, *self._container_lines(view.pod, cs, init), *event_lines,
                                 *self._log_sections(logs, budgets, found)])
            last = _last_terminated(cs)
            created = _aware(last.finished_at) if last and last.finished_at else None
            if created is None and cs.state and cs.state.terminated:
                created = _aware(cs.state.terminated.finished_at)
            found.items.append(ContextItem(
                kind=ContextKind.POD_LOG,
                source=f"k8s:{ns}/pod/{view.name}/{cs.name}",
                title=self._title(view.name, cs, init)[:500],
                content=content,
                created_at=created or view.when(),
            ))

    def _split(self, logs: list[_Log], *, crash_first: bool) -> list[int]:
        """Token budgets per log: two thirds to the instance that crashed when there are two.

        `logs` is [previous, current] or [current]. When the container runs again, the
        previous instance holds the crash; when it waits in back-off, the latest one does."""
        present = [log.text for log in logs]
        if len(logs) < 2 or not all(present):
            return [self.excerpt_tokens if text else 0 for text in present]
        major = self.excerpt_tokens * 2 // 3
        minor = self.excerpt_tokens - major
        return [major, minor] if crash_first else [minor, major]

    def _log_sections(self, logs: list[_Log], budgets: list[int], found: _Found) -> list[str]:
        lines: list[str] = []
        for log, budget in zip(logs, budgets, strict=True):
            if log.text is None:
                lines.append(f"{log.label}: not available ({log.missing})")
                continue
            if not log.text.strip():
                lines.append(f"{log.label}: empty")
                continue
            found.blobs[log.blob] = log.text
            excerpt = excerpt_log(log.text, max(budget, 1), self._count)
            kept = f"tail of {self.tail_lines} lines asked for; {excerpt.describe()}"
            if log.dropped_bytes:
                kept += f"; the {log.dropped_bytes:,} bytes before the last {self.max_log_bytes:,} not kept"
            lines.append(f"{log.label} ({kept}):")
            lines.append(excerpt.text)
        return lines

    def _pod_lines(self, view: _Pod, target: PodSelector) -> list[str]:
        pod = view.pod
        status = pod.status
        spec = pod.spec
        node = f", node {spec.node_name}" if spec and spec.node_name else ""
        lines = [f"Pod {view.name} in namespace {target.namespace} (selector {target.selector}{node})"]
        phase = (status.phase if status else None) or "Unknown"
        phase_text = f"Phase: {phase}"
        if status and status.reason:
            phase_text += f" ({status.reason})"
        if status and status.message:
            phase_text += f": {_one_line(status.message)}"
        ready = next((c for c in (status.conditions or []) if c.type == "Ready"), None) if status else None
        phase_text += f"; ready: {'yes' if ready and ready.status == 'True' else 'no'}"
        if ready and ready.status != "True" and (ready.reason or ready.message):
            phase_text += f" ({_one_line(': '.join(x for x in (ready.reason, ready.message) if x))})"
        lines.append(phase_text)
        for condition in (status.conditions or []) if status else []:
            if condition.type == "PodScheduled" and condition.status != "True" and condition.message:
                lines.append(f"Not scheduled: {_one_line(condition.message)}")
        owner = (pod.metadata.owner_references or [None])[0]
        started = f"started {_ts(status.start_time)}" if status and status.start_time else "not started"
        lines.append(f"Pod {started}" + (f", owned by {owner.kind} {owner.name}" if owner else ""))
        if pod.metadata.deletion_timestamp:
            lines.append(f"Terminating since {_ts(pod.metadata.deletion_timestamp)}")
        return lines

    def _container_lines(self, pod: Any, cs: Any, init: bool) -> list[str]:
        kind = "Init container" if init else "Container"
        lines = [f"{kind} {cs.name}: image {cs.image}, ready: {'yes' if cs.ready else 'no'}, "
                 f"restarts: {cs.restart_count}",
                 f"  State: {_state_text(cs.state)}"]
        last = _last_terminated(cs)
        if last:
            lines.append(f"  Last termination: {_terminated_text(last)}")
        # The memory limit is half of an OOMKilled story; requests explain scheduling failures.
        specs = ((pod.spec.init_containers if init else pod.spec.containers) or []) if pod.spec else []
        spec = next((c for c in specs if c.name == cs.name), None)
        resources = spec.resources if spec else None
        parts = [f"{which} " + ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
                 for which, values in (("requests", resources.requests if resources else None),
                                       ("limits", resources.limits if resources else None)) if values]
        if parts:
            lines.append(f"  Resources: {'; '.join(parts)}")
        return lines

    def _event_lines(self, view: _Pod) -> list[str]:
        if not view.events:
            return ["Events: none recorded (the API server keeps events for about an hour)"]
        shown = view.events[: self.max_events]
        of = f", {len(shown)} of {len(view.events)}" if len(shown) < len(view.events) else ""
        lines = [f"Events (newest first{of}):"]
        for event in shown:
            count = _event_count(event)
            times = f" (x{count})" if count > 1 else ""
            lines.append(f"  {_ts(_event_time(event))} {event.type or 'Normal'} {event.reason or '?'}{times}: "
                         f"{_one_line(event.message or '', 300)}")
        return lines

    @staticmethod
    def _title(pod: str, cs: Any, init: bool) -> str:
        parts: list[str] = []
        state = cs.state
        if state and state.waiting:
            parts.append(state.waiting.reason or "Waiting")
        elif state and state.terminated:
            parts.append(_termination(state.terminated, last=False))
        elif state and state.running:
            parts.append("Running" if cs.ready else "Running, not ready")
        if cs.restart_count:
            parts.append(f"{cs.restart_count} restart{'' if cs.restart_count == 1 else 's'}")
        last = _last_terminated(cs)
        if last:
            parts.append(_termination(last, last=True))
        name = f"{pod}/{cs.name}" + (" (init)" if init else "")
        return f"{name}: {', '.join(parts) or 'unhealthy'}"


def _distinct(events: list[Any]) -> list[Any]:
    """The newest event of each reason, newest first: a title names kinds of trouble once."""
    seen: dict[str, Any] = {}
    for event in events:
        seen.setdefault(str(event.reason), event)
    return list(seen.values())
