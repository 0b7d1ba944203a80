"""How activity failures reach Temporal: deterministic ones fail at once (their types are
names.NON_RETRYABLE), an upstream service's failure retries per the workflow's policy,
after the wait the service asked for."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from cardloop.contracts.names import CARD_NOT_FOUND, CONFIG_ERROR, INVALID_INPUT, PROVIDER_REJECTED
from cardloop.integrations.upstream import UpstreamError

SOURCE_UNAVAILABLE = "SourceUnavailable"  # a context source that may answer on the next attempt


def card_not_found(card_key: str) -> ApplicationError:
    return ApplicationError(f"card {card_key!r} is not in the store", type=CARD_NOT_FOUND, non_retryable=True)


def invalid_input(message: str) -> ApplicationError:
    return ApplicationError(message, type=INVALID_INPUT, non_retryable=True)


def config_error(message: str) -> ApplicationError:
    return ApplicationError(message, type=CONFIG_ERROR, non_retryable=True)


def from_upstream(err: UpstreamError, *, retry_type: str, rejected_type: str = PROVIDER_REJECTED) -> ApplicationError:
    """Retryable: the activity retries with backoff, or after retry_after when the service said
    so. Not retryable (400/401/403/404/413, spend limit, not configured): fails at once."""
    if not err.retryable:
        return ApplicationError(str(err), err.kind, type=rejected_type, non_retryable=True)
    delay = timedelta(seconds=err.retry_after) if err.retry_after else None
    return ApplicationError(str(err), err.kind, type=retry_type, next_retry_delay=delay)


def from_provider(err: UpstreamError) -> ApplicationError:
    return from_upstream(err, retry_type=f"Provider:{err.kind}")


def from_source(err: UpstreamError) -> ApplicationError:
    return from_upstream(err, retry_type=SOURCE_UNAVAILABLE)
