"""llm.complete: one model turn through a profile, exactly once per call key.

The rule of activities/once.py: an attempt first looks for the reply stored under its call
key and, when one is there (an earlier attempt stored it and then died, or the server was
unreachable when it completed), returns it without calling the model. Otherwise it calls the
model and stores the reply and the call's usage in one transaction; the result it returns is
read back from the store, so the workflow always acts on the reply the history holds. A reply
received but not stored (the store was down) is kept in memory: the retried attempt on this
worker stores it instead of calling the model again (activities/received.py).

Every call attempt is in the ledger (store/usage.py): its row is opened before the request
leaves and settled with the provider's usage, so retries are billed too; the result carries
the usage of the call whose reply was kept (the turn's own)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import card_not_found
from cardloop.activities.ledger import billed_call, provider_for, recorded
from cardloop.activities.once import exactly_once
from cardloop.activities.promise import read_promise
from cardloop.activities.retrying import bounded_attempts
from cardloop.contracts import metrics, names
from cardloop.contracts.payloads import CompleteInput, CompleteResult, ToolCallOut
from cardloop.integrations.providers.base import Completion
from cardloop.prompts.card import Message, ToolCall
from cardloop.prompts.conversation import Conversation
from cardloop.store import StoredReply, UsageRecord

EXCERPT_CHARS = 1_500

# Replies the provider ended short of their end (stop reasons in Anthropic's words, base.py):
# a note from cardloop follows such a reply in the history, so the next turn's model knows that
# what it reads of its own last reply is not all it wrote; the result names the stop reason, and
# the stage's reason counts the cut replies. Not after a reply with tool calls: their results
# must follow them, and a cut call's arguments are refused by the tool with a reason anyway.
STOPPED_NOTES = {
    "max_tokens": ("Your last reply was cut off at the output limit ({max_tokens:,} tokens): "
                   "nothing after the cut was received. Continue from where it stopped, in shorter steps."),
    "malformed_function_call": ("The provider could not read the tool call in your last reply, so "
                                "nothing was run. Call the tool again with valid JSON arguments."),
}


class LlmActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name=names.COMPLETE)
    @bounded_attempts  # [retry] in config.toml decides when a failing model call stops
    def complete(self, inp: CompleteInput) -> CompleteResult:
        rt = self.rt
        card = rt.store.card_fields(inp.card_key)
        if card is None:
            raise card_not_found(inp.card_key)
        attempt = activity.info().attempt

        asked: dict[str, int] = {}

        def call_model() -> tuple[Completion, UsageRecord]:
            payload = json.loads(rt.store.get_blob(inp.prompt_ref, tenant=card.tenant))
            model = payload["model"]
            asked["max_tokens"] = payload["max_tokens"]
            provider = provider_for(rt, inp.profile)
            row = UsageRecord(
                call_key=inp.call_key, attempt=attempt, retry=attempt > 1, kept=False, card_key=inp.card_key,
                tenant=card.tenant, stage=inp.stage, profile=inp.profile, provider=payload["provider"], model=model,
                purpose="turn", created_at=datetime.now(UTC))
            conversation = Conversation.from_payload(payload)
            # The assembler counted the prompt's sections; a payload without counts is counted here.
            sections = payload.get("tokens") or {}
            prompt_tokens = sum(sections.values()) if sections else rt.prompt_tokens(model, conversation)
            return billed_call(
                rt, row, lambda: provider.complete(conversation, model=model, max_tokens=payload["max_tokens"],
                                                   temperature=payload["temperature"]),
                detail=f"{inp.stage} turn {inp.iteration}: waiting for {model}", conversation=conversation,
                reserve=rt.reservation(model, prompt_tokens, payload["max_tokens"]))

        ended: list[tuple[Message, str | None]] = []  # this attempt's reply and how it ended

        def record(called: tuple[Completion, UsageRecord]) -> None:
            done, usage = called
            # The tools the model asked for stay structural in the history (Message.tool_calls).
            calls = tuple(ToolCall(id=c.id, name=c.name, input=dict(c.input)) for c in done.tool_calls)
            reply = Message(role="assistant", content=done.text, tool_calls=calls, created_at=datetime.now(UTC))
            rt.store.record_reply(inp.card_key, reply, dedup_key=inp.call_key, stage=inp.stage, usage=usage)
            ended.append((reply, done.stop_reason))

        stored = exactly_once(lambda: rt.store.stored_reply(inp.card_key, inp.call_key), call_model, record,
                              what=f"model reply {inp.call_key}")
        recorded(rt, inp.card_key, inp.call_key)
        stopped = ""
        if stored.acted:  # a reply stored by an earlier attempt was counted by that attempt
            profile = rt.config.profiles.get(inp.profile)
            metrics.TURNS.labels(inp.stage, profile.model if profile else inp.profile).inc()
            reply, stop_reason = ended[-1]
            kept = stored.value.message
            if stop_reason in STOPPED_NOTES and (kept.content, kept.tool_calls) == (reply.content, reply.tool_calls):
                stopped = stop_reason
                if not reply.tool_calls:
                    note = Message(role="user", author="cardloop", created_at=datetime.now(UTC),
                                   content=STOPPED_NOTES[stop_reason].format(max_tokens=asked.get("max_tokens", 0)))
                    rt.store.append_message(inp.card_key, note, dedup_key=f"{inp.call_key}/stopped", stage=inp.stage)
        return result_from(stored.value, reused=not stored.acted).model_copy(update={"stopped": stopped})


def result_from(stored: StoredReply, *, reused: bool) -> CompleteResult:
    """The activity's result, built only from what the store holds."""
    text = stored.message.content
    promise, reason = read_promise(text)
    excerpt = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + " […]"
    calls = [ToolCallOut(id=c.id, name=c.name, input=c.input) for c in stored.message.tool_calls]
    if not excerpt and calls:
        excerpt = ", ".join(f"{c.name}({_brief(c.input)})" for c in calls)[:EXCERPT_CHARS]
    u = stored.usage
    if u is None:  # a reply stored before the ledger kept usage with it
        return CompleteResult(message_seq=stored.seq, promise=promise, reason=reason, excerpt=excerpt, reused=reused,
                              tool_calls=calls)
    return CompleteResult(message_seq=stored.seq, promise=promise, reason=reason, excerpt=excerpt, model=u.model,
                          input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                          cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens,
                          cost_usd=float(u.cost_usd), reused=reused, tool_calls=calls)


def _brief(args: dict[str, object]) -> str:
    """A tool call's input in a few words, for the stage's details and the Temporal UI."""
    for key in ("command", "path", "pattern"):
        if isinstance(args.get(key), str):
            return str(args[key])[:120]
    return ""
