"""How activity failures reach Temporal: deterministic ones fail at once (their types are
names.NON_RETRYABLE), an upstream service's failure retries per the workflow's policy, after
the wait the service asked for, or per [retry] in config.toml when the caller passes it (the
model call: see cardloop/contracts/retry.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from cardloop.contracts import names
from cardloop.contracts.limits import Refusal
from cardloop.contracts.names import CARD_NOT_FOUND, CONFIG_ERROR, INVALID_INPUT, PROVIDER_REJECTED
from cardloop.contracts.retry import RetryConfig, decide
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card

SOURCE_UNAVAILABLE = "SourceUnavailable"  # a context source that may answer on the next attempt


def card_not_found(card_key: str) -> ApplicationError:
    return ApplicationError(f"card {card_key!r} is not in the store", type=CARD_NOT_FOUND, non_retryable=True)


class CardReader(Protocol):
    def get_card(self, card_key: str) -> Card | None: ...

    def card_fields(self, card_key: str) -> Card | None: ...


def stored_card(store: CardReader, card_key: str) -> Card:
    """The card as the store holds it; a card that is not there is a non-retryable failure."""
    card = store.get_card(card_key)
    if card is None:
        raise card_not_found(card_key)
    return card


def stored_fields(store: CardReader, card_key: str) -> Card:
    """The card's fields without its history and context (one row read instead of the whole
    card, validated): for activities that need only its board, id, url, repo or title."""
    card = store.card_fields(card_key)
    if card is None:
        raise card_not_found(card_key)
    return card


def invalid_input(message: str) -> ApplicationError:
    return ApplicationError(message, type=INVALID_INPUT, non_retryable=True)


def config_error(message: str) -> ApplicationError:
    return ApplicationError(message, type=CONFIG_ERROR, non_retryable=True)


def limit_refused(refusal: Refusal, schedule: RetryConfig) -> ApplicationError:
    """A call the tenant's limits refused before it was made. Requests per minute: retried as a
    rate limit, after the wait the window needs ([retry]'s schedule for 429s bounds it). A token
    or cost cap: TenantLimit, not retryable (it holds until the day or month turns)."""
    if refusal.kind == "rate":
        err = UpstreamError(refusal.message, kind="rate_limited", retryable=True, retry_after=refusal.retry_after)
        return from_provider(err, schedule)
    return ApplicationError(refusal.message, refusal.limit, refusal.resets_at.isoformat(), type=names.TENANT_LIMIT,
                            non_retryable=True)


def attempt_and_elapsed() -> tuple[int, float]:
    """This attempt's number (1-based) and the seconds since the activity was first scheduled."""
    info = activity.info()
    first = info.scheduled_time
    if first.tzinfo is None:
        first = first.replace(tzinfo=UTC)
    return info.attempt, max(0.0, (datetime.now(UTC) - first).total_seconds())


def from_upstream(err: UpstreamError, *, retry_type: str, rejected_type: str = PROVIDER_REJECTED,
                  category: ApplicationErrorCategory = ApplicationErrorCategory.UNSPECIFIED) -> ApplicationError:
    """Retryable: the activity retries with backoff, or after retry_after when the service said
    so. Not retryable (400/401/403/404/413, spend limit, not configured): fails at once."""
    if not err.retryable:
        return ApplicationError(str(err), err.kind, type=rejected_type, non_retryable=True)
    delay = timedelta(seconds=err.retry_after) if err.retry_after else None
    return ApplicationError(str(err), err.kind, type=retry_type, next_retry_delay=delay, category=category)


def from_provider(err: UpstreamError, schedule: RetryConfig | None = None) -> ApplicationError:
    """A model call's failure. With `schedule` (inside an activity), the delay before the next
    attempt and when to stop come from it, and the failure's message says so in words
    ("retrying: cannot reach the model (attempt 3 of 8, next in 16 s)"); past the schedule the
    failure is ModelUnavailable, not retryable, and the stage that ran the call fails as transient."""
    if err.retryable and schedule is not None and activity.in_activity():
        attempt, elapsed = attempt_and_elapsed()
        decision = decide(err.kind, attempt, elapsed, schedule, retry_after=err.retry_after, detail=str(err))
        if decision.delay is None:
            return ApplicationError(decision.message, err.kind, type=names.MODEL_UNAVAILABLE, non_retryable=True)
        return ApplicationError(decision.message, err.kind, type=f"Provider:{err.kind}",
                                next_retry_delay=timedelta(seconds=decision.delay))
    return from_upstream(err, retry_type=f"Provider:{err.kind}")


def from_source(err: UpstreamError) -> ApplicationError:
    """A context source's retryable failure, before its last attempt. BENIGN: the SDK logs it at
    DEBUG, not as a warning with a traceback per attempt (13 lines on `cardloop dev`'s terminal
    for one unreachable repository over a few turns): the gather's last attempt says it once,
    as a warning and in the prompt (activities/context.py), and Temporal's UI shows each attempt."""
    return from_upstream(err, retry_type=SOURCE_UNAVAILABLE, category=ApplicationErrorCategory.BENIGN)
