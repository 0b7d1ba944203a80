"""Kubernetes API failures as UpstreamErrors: 401/403/404 and other 4xx are final, 429/5xx,
timeouts and an unreachable cluster retry, honouring Retry-After. Reasons are built from the
API server's Status message and the host (without any userinfo), never from the configuration
or the request headers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3
from kubernetes.client.exceptions import ApiException

from cardloop.integrations.upstream import UpstreamError, clamp_wait, retry_after_header

MESSAGE_CHARS = 500  # a Status or termination message is a hint, not a log


@dataclass(frozen=True)
class Call:
    """One API request, as an RBAC rule names it: for error messages that say what to grant."""

    verb: str
    resource: str
    namespace: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}{self.detail} in namespace {self.namespace!r}"


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
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


def status_message(exc: ApiException) -> str:
    message = _status(exc).get("message")
    if isinstance(message, str) and message:
        return one_line(message)
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else exc.body
    return one_line(body or exc.reason or "no message", 300)


def retry_after(exc: ApiException) -> float | None:
    """Seconds the server asked us to wait: Retry-After (seconds or an HTTP date), else the
    Status's details.retryAfterSeconds (the API server sends both on 429 and some 5xx)."""
    seconds = retry_after_header(exc.headers)
    if seconds is None:
        details = _status(exc).get("details")
        hint = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        if isinstance(hint, int | float):
            seconds = float(hint)
    return clamp_wait(seconds)


def api_error(exc: ApiException, call: Call, host: str) -> UpstreamError:
    status = int(exc.status or 0)
    message = status_message(exc)
    if status == 0:
        # The client raises status 0 for TLS failures. A certificate that does not verify will
        # not verify on the next attempt either; an EOF mid-handshake might.
        text = str(exc.reason or "")
        final = "certificate verify failed" in text.lower()
        return UpstreamError(
            f"Kubernetes API at {host}: TLS or client error while trying to {call}: {one_line(text, 300)}"
            + (" (check the cluster's CA certificate in the kubeconfig)" if final else ""),
            kind="connection", retryable=not final,
        )
    if status == 401:
        return UpstreamError(
            f"Kubernetes API at {host} rejected the credentials (401 Unauthorized) while trying to {call}: "
            f"{message}. The token is missing, expired or revoked: check the kubeconfig context or the "
            "worker's service account token.",
            kind="auth", retryable=False, status=status,
        )
    if status == 403:
        return UpstreamError(
            f"Kubernetes API forbids {call} (403 Forbidden): {message}. The worker's identity needs "
            f"'{call.verb}' on '{call.resource}' in namespace {call.namespace!r} (deploy/k8s/pod-reader).",
            kind="auth", retryable=False, status=status,
        )
    if status == 404:
        return UpstreamError(
            f"Kubernetes API at {host} answered 404 Not Found to {call}: {message}. Check the API server "
            f"address and that namespace {call.namespace!r} exists.",
            kind="not_found", retryable=False, status=status,
        )
    if status == 429 or status == 408 or status == 409 or status >= 500:
        return UpstreamError(
            f"Kubernetes API at {host} answered {status} {exc.reason or ''} to {call}: {message}".replace(" :", ":"),
            kind={429: "rate_limited", 408: "timeout", 409: "conflict"}.get(status, "server"),
            retryable=True, status=status, retry_after=retry_after(exc),
        )
    hint = " (is the label selector valid?)" if status == 400 and call.resource == "pods" else ""
    return UpstreamError(
        f"Kubernetes API refused {call} ({status} {exc.reason or ''}): {message}{hint}".replace(" )", ")"),
        kind="invalid_request", retryable=False, status=status,
    )


def connection_error(exc: BaseException, call: Call, host: str, timeouts: tuple[float, float]) -> UpstreamError:
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
    return UpstreamError(
        f"Kubernetes API at {host} is unreachable (while trying to {call}): {one_line(why, 300)}",
        kind="timeout" if "within" in why else "connection", retryable=True,
    )


def safe_host(url: str) -> str:
    """The API server URL without userinfo, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
