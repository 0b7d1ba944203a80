"""Reading pods: how unhealthy each one is (phase, container states, restarts, recent warning
events) and the lines that describe a pod, its containers and its events in an item."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cardloop.integrations.sources.kubernetes.errors import one_line

# A waiting container in these states is on its way up, not failing (on its own).
_STARTING = frozenset({"ContainerCreating", "PodInitializing"})
# Linux signal numbers (the container's OS, not the worker's): exit code 128+n means signal n.
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
            9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}


@dataclass(frozen=True)
class PodSelector:
    """Where a repository's service runs: a namespace and a label selector."""

    namespace: str
    selector: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.selector}"


def aware(when: datetime | None) -> datetime | None:
    if when is None:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def ts(when: datetime | None) -> str:
    when = aware(when)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else "?"


def event_time(event: Any) -> datetime | None:
    series = event.series
    return aware(
        event.last_timestamp
        or (series.last_observed_time if series else None)
        or event.event_time
        or event.first_timestamp
        or event.metadata.creation_timestamp
    )


def event_count(event: Any) -> int:
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
        text += f", started {ts(terminated.started_at)}"
    if terminated.finished_at:
        text += f", finished {ts(terminated.finished_at)}"
    if terminated.message:
        text += f"; message: {one_line(terminated.message)}"
    return text


def _state_text(state: Any) -> str:
    if state is None:
        return "unknown"
    if state.waiting:
        message = f": {one_line(state.waiting.message)}" if state.waiting.message else ""
        return f"waiting, {state.waiting.reason or 'no reason given'}{message}"
    if state.running:
        return f"running since {ts(state.running.started_at)}"
    if state.terminated:
        return "terminated, " + _terminated_text(state.terminated)
    return "unknown"


def last_terminated(cs: Any) -> Any:
    return cs.last_state.terminated if cs.last_state else None


def started(cs: Any) -> bool:
    """Whether an instance of the container ever ran, so that a log may exist."""
    state = cs.state
    return bool((state and (state.running or state.terminated)) or last_terminated(cs) or cs.restart_count)


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
class Pod:
    """One pod as this source judges it."""

    pod: Any
    events: list[Any]  # newest first
    warnings: list[Any]  # Warning events within the window, newest first
    problems: list[str]  # pod-level: "Pending (Unschedulable)", "not ready"
    containers: list[tuple[Any, bool, int]]  # (status, is_init, trouble) of troubled containers
    severity: int
    events_missing: str | None = None  # why the pod's events could not be read (then `events` is [])

    @property
    def name(self) -> str:
        return str(self.pod.metadata.name)

    @property
    def unhealthy(self) -> bool:
        return self.severity > 0

    def when(self) -> datetime:
        """When it last went wrong: for ordering pods and dating pod-level items."""
        times = [event_time(e) for e in self.events[:1]]
        for cs, _init, _trouble in self.containers:
            last = last_terminated(cs)
            times.append(aware(last.finished_at) if last else None)
        status = self.pod.status
        times.append(aware(status.start_time) if status else None)
        times.append(aware(self.pod.metadata.creation_timestamp))
        known = [t for t in times if t]
        return max(known) if known else datetime.now(UTC)

    def summary(self) -> str:
        words: list[str] = []
        for cs, _init, _trouble in self.containers:
            state = cs.state
            if state and state.waiting and state.waiting.reason and state.waiting.reason not in _STARTING:
                words.append(f"{cs.name} {state.waiting.reason}")
            elif last_terminated(cs) and last_terminated(cs).reason == "OOMKilled":
                words.append(f"{cs.name} OOMKilled")
            elif cs.restart_count:
                words.append(f"{cs.name} {cs.restart_count} restarts")
        # "not ready" says nothing more once a container says why; Pending or Failed does.
        words = [p for p in self.problems if p != "not ready" or not words] + words
        if not words and self.warnings:
            words.append(f"Warning {self.warnings[0].reason}")
        return f"{self.name} ({', '.join(dict.fromkeys(words)) or 'unhealthy'})"


def statuses(pod: Any) -> list[tuple[Any, bool]]:
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


def judge(pod: Any, events: list[Any], since: datetime) -> Pod:
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
    for cs, init in statuses(pod):
        trouble = _container_trouble(cs, init=init, phase=phase)
        if trouble:
            containers.append((cs, init, trouble))
            severity = max(severity, trouble)
    warnings = [e for e in events if e.type == "Warning" and (event_time(e) or since) >= since]
    if warnings:
        severity = max(severity, 1)
    return Pod(pod, events, warnings, problems, containers, severity)



def pod_lines(view: Pod, target: PodSelector) -> list[str]:
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
        phase_text += f": {one_line(status.message)}"
    ready = next((c for c in (status.conditions or []) if c.type == "Ready"), None) if status else None
    phase_text += f"; ready: {'yes' if ready and ready.status == 'True' else 'no'}"
    if ready and ready.status != "True" and (ready.reason or ready.message):
        phase_text += f" ({one_line(': '.join(x for x in (ready.reason, ready.message) if x))})"
    lines.append(phase_text)
    for condition in (status.conditions or []) if status else []:
        if condition.type == "PodScheduled" and condition.status != "True" and condition.message:
            lines.append(f"Not scheduled: {one_line(condition.message)}")
    owner = (pod.metadata.owner_references or [None])[0]
    started = f"started {ts(status.start_time)}" if status and status.start_time else "not started"
    lines.append(f"Pod {started}" + (f", owned by {owner.kind} {owner.name}" if owner else ""))
    if pod.metadata.deletion_timestamp:
        lines.append(f"Terminating since {ts(pod.metadata.deletion_timestamp)}")
    return lines

def container_lines(pod: Any, cs: Any, init: bool) -> list[str]:
    kind = "Init container" if init else "Container"
    lines = [f"{kind} {cs.name}: image {cs.image}, ready: {'yes' if cs.ready else 'no'}, "
             f"restarts: {cs.restart_count}",
             f"  State: {_state_text(cs.state)}"]
    last = last_terminated(cs)
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

def event_lines(view: Pod, max_events: int) -> list[str]:
    if view.events_missing:
        return [f"Events: not read ({view.events_missing})"]
    if not view.events:
        return ["Events: none recorded (the API server keeps events for about an hour)"]
    shown = view.events[: max_events]
    of = f", {len(shown)} of {len(view.events)}" if len(shown) < len(view.events) else ""
    lines = [f"Events (newest first{of}):"]
    for event in shown:
        count = event_count(event)
        times = f" (x{count})" if count > 1 else ""
        lines.append(f"  {ts(event_time(event))} {event.type or 'Normal'} {event.reason or '?'}{times}: "
                     f"{one_line(event.message or '', 300)}")
    return lines

def container_title(pod: str, cs: Any, init: bool) -> str:
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
    last = last_terminated(cs)
    if last:
        parts.append(_termination(last, last=True))
    name = f"{pod}/{cs.name}" + (" (init)" if init else "")
    return f"{name}: {', '.join(parts) or 'unhealthy'}"


def distinct(events: list[Any]) -> list[Any]:
    """The newest event of each reason, newest first: a title names kinds of trouble once."""
    seen: dict[str, Any] = {}
    for event in events:
        seen.setdefault(str(event.reason), event)
    return list(seen.values())
