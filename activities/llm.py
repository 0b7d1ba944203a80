"""llm.complete: one model turn through a profile, with its reply and usage recorded.

The reply joins the card's chat history and the usage row is written under the call key,
both idempotently: a retried or re-run activity never duplicates either."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import card_not_found, from_provider
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.activities.promise import read_promise
from cardloop.activities.retrying import bounded_attempts
from cardloop.contracts import names
from cardloop.contracts.payloads import CompleteInput, CompleteResult
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Message
from cardloop.prompts.conversation import Conversation
from cardloop.store import UsageRecord

EXCERPT_CHARS = 1_500


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
        payload = json.loads(rt.store.get_blob(inp.prompt_ref, tenant=card.tenant))
        conversation = Conversation.from_payload(payload)
        model = payload["model"]
        try:
            provider = rt.provider(inp.profile)
            done = call_with_heartbeat(
                lambda: provider.complete(conversation, model=model, max_tokens=payload["max_tokens"],
                                          temperature=payload["temperature"]),
                detail=f"{inp.stage} turn {inp.iteration}: waiting for {model}")
        except UpstreamError as err:
            activity.logger.warning("model call failed (%s): %s", err.kind, err)
            raise from_provider(err, rt.config.retry) from None
        now = datetime.now(UTC)
        seq = rt.store.append_message(inp.card_key, Message(role="assistant", content=done.text, created_at=now),
                                      dedup_key=inp.call_key, stage=inp.stage)
        u = done.usage
        cost = rt.cost(model, u)
        rt.store.record_usage(UsageRecord(
            call_key=inp.call_key, card_key=inp.card_key, tenant=card.tenant, stage=inp.stage,
            profile=inp.profile, provider=payload["provider"], model=done.model or model, purpose="turn",
            input_tokens=u.input_tokens, output_tokens=u.output_tokens, cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens, cost_usd=cost, created_at=now))
        promise, reason = read_promise(done.text)
        excerpt = done.text if len(done.text) <= EXCERPT_CHARS else done.text[:EXCERPT_CHARS] + " […]"
        return CompleteResult(message_seq=seq, promise=promise, reason=reason, excerpt=excerpt,
                              model=done.model or model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                              cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens,
                              cost_usd=cost)
