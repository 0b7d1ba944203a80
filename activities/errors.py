"""How activity failures reach Temporal: deterministic ones fail at once, transient ones
retry per the workflow's policy, honouring the provider's retry-after."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from cardloop.integrations.providers import ProviderError


def card_not_found(card_key: str) -> ApplicationError:
    return ApplicationError(f"card {card_key!r} is not in the store", type="CardNotFound", non_retryable=True)


def invalid_input(message: str) -> ApplicationError:
    return ApplicationError(message, type="InvalidInput", non_retryable=True)


def config_error(message: str) -> ApplicationError:
    return ApplicationError(message, type="ConfigError", non_retryable=True)


def from_provider(err: ProviderError) -> ApplicationError:
    """Retryable: the activity retries with backoff, or after retry-after when the provider
    said so. Not retryable (400/401/403/404/413, spend limit): the stage fails with the message."""
    if not err.retryable:
        return ApplicationError(str(err), err.kind, type="ProviderRejected", non_retryable=True)
    delay = timedelta(seconds=err.retry_after) if err.retry_after else None
    return ApplicationError(str(err), err.kind, type=f"Provider:{err.kind}", next_retry_delay=delay)
