"""Which failures of a stage pass by themselves: the card may run such a stage again
(`cardloop card retry`, or [retry] auto_retry_after) and expect another outcome."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from cardloop.contracts import names


def is_transient(cause: BaseException) -> bool:
    """`cause`: the root cause of the activity failure that ended the stage."""
    if isinstance(cause, ApplicationError):
        kind = cause.type or ""
        # Provider:<kind> ends a stage only when its retries ran out: still the provider's weather.
        return kind in names.TRANSIENT_FAILURES or kind.startswith("Provider:")
    return False


def root_cause(err: BaseException) -> BaseException:
    cause = err
    while cause.__cause__ is not None or getattr(cause, "cause", None) is not None:
        cause = getattr(cause, "cause", None) or cause.__cause__  # type: ignore[assignment]
    return cause


def root_message(err: BaseException) -> str:
    """The innermost cause's message: what a person can act on ("store unavailable: database
    is locked", the provider's 400), not "Activity task failed"."""
    cause = root_cause(err)
    return str(getattr(cause, "message", None) or cause)[:1000]
