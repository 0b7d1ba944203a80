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
