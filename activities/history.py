"""history.append and history.summarize (RLM summarization), exactly once (activities/once.py).

An append is looked up by its dedup key first. A summary already stored for the range is
returned as it is; each model call of a summary (a chunk, or the summary of the chunks) has
its result recorded under what it asked (model, output limit, request) with the call's usage
(its ledger row keyed by the summarize), and looked up before the model is called, so a
retried summarize pays only for the calls that had not finished, and a later summarize of a
range whose summarize failed for good pays only for the chunks that one did not finish.

The summary of a folded range is cached in the store by the range it covers. When a later
turn folds a longer range from the same start, only the new messages are summarized, on top
of the cached summary (incremental). A range larger than the summarizer's window is
summarized in chunks, then the chunk summaries are summarized (recursively)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import card_not_found, invalid_input
from cardloop.activities.ledger import billed_call, provider_for, recorded
from cardloop.activities.once import exactly_once
from cardloop.contracts import metrics, names
from cardloop.contracts.payloads import AppendInput, SummarizeInput, SummarizeResult
from cardloop.prompts.card import Card, Message
from cardloop.prompts.conversation import Conversation, SystemBlock, Turn
from cardloop.prompts.isolate import wrap_untrusted
from cardloop.prompts.logs import excerpt_text
from cardloop.store import UsageRecord

SUMMARY_TEMPLATE = "summarize"
# Room for the summarize prompt itself and the reply framing within the summarizer's window.
PROMPT_RESERVE = 1_500


def transcript_line(seq: int, m: Message, text: str) -> str:
    who = m.role if m.role != "tool" else f"tool result ({m.tool_call_id})"
    if m.author:
        who += f" ({m.author})"
    when = f" {m.created_at.isoformat(timespec='minutes')}" if m.created_at else ""
    parts = [f"[{seq + 1}] {who}{when}:", text]
    for call in m.tool_calls:
        parts.append(f"[tool call {call.id}: {call.name} {json.dumps(call.input, sort_keys=True)}]")
    return "\n".join(p for p in parts if p)


@dataclass
class _Tally:
    calls: int = 0
    cost: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


def _final_attempt(exc: BaseException) -> bool:
    """Whether Temporal will not run this activity again after `exc` (non-retryable, or its
    policy's last attempt): the workflow then goes on without the summary."""
    if isinstance(exc, CancelledError):
        return False
    if isinstance(exc, ApplicationError) and exc.non_retryable:
        return True
    info = activity.info()
    policy = info.retry_policy
    if policy is None:
        return False
    if isinstance(exc, ApplicationError) and exc.type in (policy.non_retryable_error_types or ()):
        return True
    return bool(policy.maximum_attempts) and info.attempt >= policy.maximum_attempts


class HistoryActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name=names.APPEND)
    def append(self, inp: AppendInput) -> int:
        if self.rt.store.card_fields(inp.card_key) is None:
            raise card_not_found(inp.card_key)
        store = self.rt.store

        def lookup() -> int | None:
            found = store.message_by_key(inp.card_key, inp.dedup_key)
            return None if found is None else found[0]

        return exactly_once(
            lookup,
            lambda: Message(role=inp.role, content=inp.text, author=inp.author, created_at=datetime.now(UTC),
                            tool_call_id=inp.tool_call_id, is_error=inp.is_error),
            lambda m: store.append_message(inp.card_key, m, dedup_key=inp.dedup_key, stage=inp.stage),
            what=f"message {inp.dedup_key}").value

    @activity.defn(name=names.SUMMARIZE)
    def summarize(self, inp: SummarizeInput) -> SummarizeResult:
        rt = self.rt
        cfg = rt.config.summarizer
        profile = cfg.profile
        model = rt.config.profiles[profile].model
        if inp.first < 0 or inp.last < inp.first:
            raise invalid_input(f"bad message range {inp.first}-{inp.last}")
        card = rt.store.card_fields(inp.card_key)
        if card is None:
            raise card_not_found(inp.card_key)
        tally = _Tally()
        try:
            stored = exactly_once(lambda: rt.store.find_summary(inp.card_key, inp.first, inp.last, model),
                                  lambda: self._summarize(inp, card, profile, model, tally),
                                  lambda made: rt.store.put_summary(inp.card_key, inp.first, inp.last, model, *made),
                                  what=f"summary of messages {inp.first}-{inp.last}")
        except Exception as exc:
            if _final_attempt(exc):  # the stage falls back to the truncated history
                metrics.SUMMARIZER_FALLBACKS.inc()
            raise
        if not stored.acted:
            metrics.SUMMARIES.labels("cached").inc()
            return SummarizeResult(tokens=stored.value.tokens, method="cached")
        metrics.SUMMARIES.labels(stored.value.method).inc()
        return SummarizeResult(tokens=stored.value.tokens, method=stored.value.method, calls=tally.calls,
                               cost_usd=tally.cost, input_tokens=tally.input_tokens,
                               output_tokens=tally.output_tokens, cache_read_tokens=tally.cache_read_tokens,
                               cache_write_tokens=tally.cache_write_tokens)

    def _summarize(self, inp: SummarizeInput, card: Card, profile: str, model: str,
                   tally: _Tally) -> tuple[str, int, str]:
        """(text, tokens, method) of a new summary of inp.first..inp.last."""
        rt = self.rt
        cfg = rt.config.summarizer
        base = rt.store.best_summary(inp.card_key, inp.first, inp.last, model)
        start = base.last + 1 if base else inp.first
        messages = rt.store.messages(inp.card_key, start, inp.last + 1)
        if len(messages) != inp.last - start + 1:
            raise invalid_input(f"messages {start}-{inp.last} of {inp.card_key} are not all in the store")
        counter = rt.assembler.counter
        scrub = rt.assembler.scrubber
        window = cfg.max_input_tokens - PROMPT_RESERVE
        pieces = []
        if base is not None:
            pieces.append(f"[summary of messages {base.first + 1}-{base.last + 1}]\n{base.text}")
        for offset, m in enumerate(messages):
            clean = scrub.scrub_message(m)  # author, ids, tool names and inputs too, not only the content
            line = transcript_line(start + offset, clean, clean.content)
            if counter.count(line) > window // 2:  # one huge message must not sink the chunking
                line = excerpt_text(line, window // 2, counter.count).text
            pieces.append(line)
        out_tokens = min(cfg.max_tokens, max(200, inp.max_tokens))
        card_key, first, last = inp.card_key, inp.first, inp.last
        # The key names what the calls read (the range and the cached summary they start from)
        # and this activity (its workflow run and activity id): the same across its retries, so
        # a retry finds the calls an earlier attempt finished, but new for a later summarize of
        # the same range (one whose earlier summarize failed for good), whose calls are new
        # calls: under the old key they wrote over the earlier calls' ledger rows.
        # The workflow names the key when it can (SummarizeInput.key: it then reads back what a
        # summarize that failed for good paid for); runs recorded before send none.
        info = activity.info()
        prefix = (f"{inp.key}/{first}-{last}/from-{start}" if inp.key else
                  f"summary/{card_key}/{first}-{last}/from-{start}/{info.workflow_run_id}/{info.activity_id}")
        text = self._condense(pieces, window, out_tokens, profile, model, prefix, card.tenant, card_key,
                              f"card {scrub.scrub(card.id)}, messages {first + 1}-{last + 1}", tally)
        method = "incremental" if base else ("recursive" if tally.calls > 1 else "llm")
        return text, counter.count(text), method

    def _condense(self, pieces: Sequence[str], window: int, out_tokens: int, profile: str, model: str,
                  call_prefix: str, tenant: str, card_key: str, source: str, tally: _Tally,
                  depth: int = 0) -> str:
        """Summarize `pieces`; chunk when they exceed the window, then summarize the summaries."""
        counter = self.rt.assembler.counter
        chunks: list[list[str]] = [[]]
        used = 0
        for piece in pieces:
            n = counter.count(piece) + 2
            if chunks[-1] and used + n > window:
                chunks.append([])
                used = 0
            chunks[-1].append(piece)
            used += n
        if len(chunks) == 1:
            return self._call("\n\n".join(chunks[0]), out_tokens, profile, model, f"{call_prefix}/d{depth}",
                              tenant, card_key, source, tally)
        if depth >= 4:
            raise invalid_input("summary recursion too deep: raise summarizer.max_input_tokens")
        partials = [
            self._call("\n\n".join(chunk), out_tokens, profile, model, f"{call_prefix}/d{depth}c{i}",
                       tenant, card_key, f"{source}, part {i + 1} of {len(chunks)}", tally)
            for i, chunk in enumerate(chunks)
        ]
        labelled = [f"[part {i + 1} of {len(partials)}]\n{p}" for i, p in enumerate(partials)]
        return self._condense(labelled, window, out_tokens, profile, model, call_prefix, tenant, card_key,
                              source, tally, depth + 1)

    def _call(self, transcript: str, out_tokens: int, profile: str, model: str, call_key: str,
              tenant: str, card_key: str, source: str, tally: _Tally) -> str:
        rt = self.rt
        attempt = activity.info().attempt
        system = rt.assembler.templates.load(SUMMARY_TEMPLATE).render({"max_tokens": out_tokens})
        conv = Conversation(
            system=(SystemBlock(system, cache=True),),
            turns=(Turn("user", wrap_untrusted(transcript, kind="conversation", source=source)
                        + "\n\nWrite the summary now, with all six headings."),),
        )

        def call_model() -> tuple[str, UsageRecord]:
            provider = provider_for(rt, profile)
            row = UsageRecord(
                call_key=call_key, attempt=attempt, retry=attempt > 1, kept=False, card_key=card_key, tenant=tenant,
                stage="summary", profile=profile, provider=rt.config.profiles[profile].provider, model=model,
                purpose="summary", created_at=datetime.now(UTC))
            done, billed = billed_call(
                rt, row, lambda: provider.complete(conv, model=model, max_tokens=out_tokens, temperature=0.0),
                detail=f"summarizing {source}", conversation=conv,
                reserve=rt.reservation(model, rt.prompt_tokens(model, conv), out_tokens))
            if not done.text.strip():
                recorded(rt, card_key, call_key)  # not kept for a retry: the next call asks again
                raise invalid_input("the summarizer returned an empty summary")
            return done.text.strip(), billed

        # The summary is stored under what was asked (model, output limit, the whole request), the
        # call's ledger row under this activity's call key: a later summarize that asks the same
        # (turn 2 folding the range whose summarize failed for good at turn 1) reuses the chunks
        # that were paid for, and each call still has rows of its own.
        asked = hashlib.sha256(json.dumps([model, out_tokens, system, conv.turns[0].text]).encode()).hexdigest()
        effect_key = f"summary/{card_key}/asked-{asked[:40]}"

        def lookup() -> str | None:
            found = rt.store.effect(card_key, effect_key)
            return None if found is None else found.result

        once = exactly_once(lookup, call_model,
                            lambda made: rt.store.record_effect(card_key, effect_key, "summary", *made),
                            what=f"summary call {call_key}")
        recorded(rt, card_key, call_key)
        if once.acted:
            metrics.SUMMARIZER_CALLS.labels(model).inc()
        tally.calls += 1
        # This summarize's figures: its calls' (an earlier attempt's too); a summary another
        # summarize paid for is in that one's run already (ledger.kept reads a failed one's).
        usage = rt.store.call_usage(card_key, call_key)
        if usage is not None:
            tally.cost += float(usage.cost_usd)
            tally.input_tokens += usage.input_tokens
            tally.output_tokens += usage.output_tokens
            tally.cache_read_tokens += usage.cache_read_tokens
            tally.cache_write_tokens += usage.cache_write_tokens
        return once.value
