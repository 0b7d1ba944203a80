"""context.gather: run one context source for a card and stage, and keep what it found.

A source that fails never fails the stage: transient failures retry per the activity's
policy; on the last attempt (or at once for a failure retrying cannot fix) the card gets a
`source_status` item saying the source was unavailable and why, so the prompt tells the agent
what it is missing, and the activity returns normally.

A partial result (a source that read some parts and failed on others: base.py) whose failures
include one that retrying may fix retries the same way; on the last attempt (or at once, when
none would) its items are kept and the status item names what was not read and why."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import from_source, invalid_input, stored_card
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.contracts import metrics
from cardloop.contracts.payloads import GatherInput, GatherResult, NamedBlob
from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.integrations.sources.registry import SOURCES, source_label
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.stages import parse_stage

# The same source unavailable for the same reason (no GitHub credentials, one unreachable
# repository) is a warning once per this long per worker, and info in between: every stage run
# gathers every source, and the same sentence on every run buries the warnings that differ.
REPEAT_WARNING_SECONDS = 600.0


class RepeatedWarnings:
    """Which (source, reason) pairs were warned of lately; thread-safe (activities run in threads)."""

    def __init__(self, every: float = REPEAT_WARNING_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def first(self, source: str, why: str) -> bool:
        """True when (source, why) was not warned of within `every` seconds (and records it now)."""
        now = self.clock()
        with self._lock:
            last = self._last.get((source, why))
            if last is not None and now - last < self.every:
                return False
            if len(self._last) > 10_000:  # reasons that name cards: bounded
                self._last.clear()
            self._last[(source, why)] = now
            return True


def status_item(source: str, text: str) -> ContextItem:
    # One status item per source (same `source`), replaced on every gather.
    return ContextItem(kind=ContextKind.SOURCE_STATUS, source=f"cardloop:source/{source}",
                       title=source_label(source), content=text, created_at=datetime.now(UTC))


class ContextActivities:
    def __init__(self, rt: ActivityDeps, warnings: RepeatedWarnings | None = None) -> None:
        self.rt = rt
        self.warnings = warnings or RepeatedWarnings()

    @activity.defn(name="context.gather")
    def gather(self, inp: GatherInput) -> GatherResult:
        rt = self.rt
        try:
            stage = parse_stage(inp.stage)
        except ValueError as exc:
            raise invalid_input(str(exc)) from None
        card = stored_card(rt.store, inp.card_key)
        try:
            source = rt.source(inp.source)
            result: SourceResult = call_with_heartbeat(lambda: source.gather(SourceRequest(card, stage)),
                                                       detail=f"gathering {inp.source}")
        except UpstreamError as err:
            last = activity.info().attempt >= inp.max_attempts
            if err.retryable and not last:
                raise from_source(err) from None
            why = err.message if not err.retryable else f"{err.message} (after {activity.info().attempt} attempts)"
            rt.store.put_context_items(inp.card_key, [status_item(
                inp.source, f"{source_label(inp.source)} are unavailable for this turn: {why}. "
                            "Work with what the prompt has, and say what you could not check.")])
            # The attempt count is left out of the key: "(after 3 attempts)" is the same outage.
            level = logging.WARNING if self.warnings.first(inp.source, err.message) else logging.INFO
            activity.logger.log(level, "context source %s unavailable for %s: %s", inp.source, inp.card_key, why)
            metrics.CONTEXT_SOURCE_FAILURES.labels(inp.source).inc()
            return GatherResult(source=inp.source, status="unavailable", reason=why[:500])
        attempt = activity.info().attempt
        if result.retry is not None and attempt < inp.max_attempts:
            raise from_source(result.retry) from None
        missing = ""
        if result.missing:
            after = f" (after {attempt} attempts)" if result.retry is not None else ""
            missing = "; ".join(result.missing) + after
            level = logging.WARNING if self.warnings.first(inp.source, result.missing[0]) else logging.INFO
            activity.logger.log(level, "context source %s partial for %s: not read: %s", inp.source, inp.card_key,
                                missing)
        logs = []
        for label, text in result.blobs.items():
            ref = rt.store.put_blob(card.tenant, text, f"context:{label}"[:64])
            # Exact counts cost a tokenizer pass; past 400,000 characters the size alone decides
            # whether research is needed (logs run ~2.5-4 characters a token: this errs high).
            tokens = rt.assembler.counter.count(text) if len(text) <= 400_000 else len(text) // 3
            logs.append(NamedBlob(name=label[:500], ref=ref, tokens=tokens))
        found = f"{len(result.items)} item(s)" + (f"; {'; '.join(result.notes)}" if result.notes else "")
        if missing:  # first, so the cut below keeps it
            found = (f"partial, {len(result.items)} item(s) kept; not read: {missing}. Work with what was read, "
                     f"and say what you could not check. Also: {found}")
        items = [*result.items, status_item(inp.source, f"{source_label(inp.source)}: {found}"[:2000])]
        entry = SOURCES.get(inp.source)
        kinds = tuple(kind.value for kind in entry.kinds) if entry else ()
        rt.store.put_context_items(inp.card_key, items, replace_kinds=kinds)
        return GatherResult(source=inp.source, status="ok", items=len(result.items),
                            reason="; ".join(result.notes)[:500], logs=logs[:50],
                            missing=[m[:500] for m in result.missing[:20]])
