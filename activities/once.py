"""THE rule for every activity with a side effect: look up, then act, then record, then read back.

Temporal runs an activity at least once: a worker that dies after the effect but before the
activity completed, or a server that is unreachable at that moment, makes Temporal run it
again. So every activity whose work leaves a trace outside the workflow (a model call whose
reply joins the history, a summary, and later tool calls, pushes, PRs, comments) follows one
shape, `exactly_once`:

1. lookup: is a result stored under this activity's key (call key, dedup key, range)?
   Then return it, without acting again.
2. act: do the work (call the model, push, comment).
3. record: store the result under the key, idempotently: the first result stored wins.
4. lookup again and return THAT: the result handed to the workflow is always built from
   what the store holds, never from what this attempt happened to produce. Two attempts
   that both acted (a zombie whose heartbeat stopped) then still agree on one result.

The key must be chosen by the workflow (deterministic, e.g. `<workflow id>/turn-<n>`), so
every attempt of one step carries the same key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from cardloop.contracts import names

R = TypeVar("R")
A = TypeVar("A")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Once(Generic[R]):
    value: R  # what the store holds under the key
    acted: bool  # False: an earlier attempt's stored result was returned, nothing was done


def exactly_once(lookup: Callable[[], R | None], act: Callable[[], A], record: Callable[[A], object],
                 *, what: str) -> Once[R]:
    found = lookup()
    if found is not None:
        if activity.in_activity():
            activity.logger.info("%s: already stored (attempt %d), returning it", what, activity.info().attempt)
        return Once(found, acted=False)
    record(act())
    stored = lookup()
    if stored is None:  # recorded, yet not readable: the store lost a committed write
        raise ApplicationError(f"store unavailable: {what} was recorded but cannot be read back",
                               type=names.STORE_UNAVAILABLE)
    return Once(stored, acted=True)


def recorded_once(store: Any, card_key: str, key: str, kind: str, result: type[M], act: Callable[[], M]) -> M:
    """exactly_once with the result kept as the card's recorded side effect (store.record_effect)."""

    def lookup() -> M | None:
        found = store.effect(card_key, key)
        return None if found is None else result.model_validate_json(found.result)

    return exactly_once(lookup, act, lambda done: store.record_effect(card_key, key, kind, done.model_dump_json()),
                        what=f"{kind} {key}").value
