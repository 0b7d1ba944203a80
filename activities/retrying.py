"""Bounded retries for an activity whose workflow policy retries without a cap (the model call).

The model call's policy (workflows/policies.py LLM) sets no maximum of attempts: the activity
itself decides when to stop, from [retry] in config.toml, so an operator can give an overloaded
provider minutes without a workflow change. Provider failures follow their schedule
(activities/errors.py from_provider); this wrapper bounds everything else:

- a failure that is not the provider's (a bug, the store) fails the call after
  [retry] other_attempts attempts, as GaveUp;
- attempts that never reach the code's own decision (the worker died mid-call, heartbeats
  stopped) end once the call has been failing for longer than the overload deadline plus
  BACKSTOP seconds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from cardloop.activities.errors import attempt_and_elapsed
from cardloop.contracts import names
from cardloop.contracts.retry import words

BACKSTOP = 600.0
F = TypeVar("F", bound=Callable[..., Any])


def bounded_attempts(method: F) -> F:
    """For an activity method of a class holding `rt` (ActivityDeps)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any) -> Any:
        if not activity.in_activity():
            return method(self, *args)
        cfg = self.rt.config.retry
        attempt, elapsed = attempt_and_elapsed()
        limit = cfg.overload_deadline + BACKSTOP
        if attempt > 1 and elapsed > limit:
            raise ApplicationError(f"gave up: the call has been failing for {words(elapsed)} "
                                   f"({attempt - 1} attempts)", type=names.GAVE_UP, non_retryable=True)
        try:
            return method(self, *args)
        except (ApplicationError, CancelledError):
            raise  # already classified, or a cancel
        except Exception as exc:
            if attempt >= cfg.other_attempts:
                activity.logger.warning("giving up after %d attempts: %r", attempt, exc)
                raise ApplicationError(f"gave up after {attempt} attempts: {type(exc).__name__}: {exc}",
                                       type=names.GAVE_UP, non_retryable=True) from exc
            raise

    return run  # type: ignore[return-value]
