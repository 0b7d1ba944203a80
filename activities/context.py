"""context.gather: run one context source for a card and stage, and keep what it found.

A source that fails never fails the stage: transient failures retry per the activity's
policy; on the last attempt (or at once for a failure retrying cannot fix) the card gets a
`source_status` item saying the source was unavailable and why, so the prompt tells the agent
what it is missing, and the activity returns normally."""

from __future__ import annotations

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


def status_item(source: str, text: str) -> ContextItem:
    # One status item per source (same `source`), replaced on every gather.
    return ContextItem(kind=ContextKind.SOURCE_STATUS, source=f"cardloop:source/{source}",
                       title=source_label(source), content=text, created_at=datetime.now(UTC))


class ContextActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

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
            activity.logger.warning("context source %s unavailable for %s: %s", inp.source, inp.card_key, why)
            metrics.CONTEXT_SOURCE_FAILURES.labels(inp.source).inc()
            return GatherResult(source=inp.source, status="unavailable", reason=why[:500])
        logs = []
        for label, text in result.blobs.items():
            ref = rt.store.put_blob(card.tenant, text, f"context:{label}"[:64])
            # Exact counts cost a tokenizer pass; past 400,000 characters the size alone decides
            # whether research is needed (logs run ~2.5-4 characters a token: this errs high).
            tokens = rt.assembler.counter.count(text) if len(text) <= 400_000 else len(text) // 3
            logs.append(NamedBlob(name=label[:500], ref=ref, tokens=tokens))
        found = f"{len(result.items)} item(s)" + (f"; {'; '.join(result.notes)}" if result.notes else "")
        items = [*result.items, status_item(inp.source, f"{source_label(inp.source)}: {found}"[:2000])]
        entry = SOURCES.get(inp.source)
        kinds = tuple(kind.value for kind in entry.kinds) if entry else ()
        rt.store.put_context_items(inp.card_key, items, replace_kinds=kinds)
        return GatherResult(source=inp.source, status="ok", items=len(result.items),
                            reason="; ".join(result.notes)[:500], logs=logs[:50])
