"""Research over large artifacts: the activities of ResearchWorkflow (workflows/research.py).

    research.buffers     the artifacts (blobs in the store) as named buffers, chunked once
    research.plan        the planner's model call (question -> search queries), chunk selection
    research.analyze     one analyst batch: its chunks -> validated findings (retried once)
    research.synthesize  findings -> the markdown report (tools, grouping when too many)

Every model call follows activities/once.py: keyed by the workflow (`<workflow id>/...`), its
reply recorded as the card's side effect together with the call's ledger row (so cost is per
card, retries billed), looked up before the call is made again. Each activity's own result
is recorded under its key too, so a retried activity returns what the store holds.
Chunk text comes from the blobs, which are redacted on the way into the store; the scrubber
runs again before a chunk reaches a prompt (the rule table may have grown since).
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import invalid_input, stored_card
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.activities.ledger import billed_call, provider_for, recorded
from cardloop.activities.once import exactly_once, recorded_once
from cardloop.activities.research_synth import Synthesizer
from cardloop.activities.retrying import bounded_attempts
from cardloop.contracts import names
from cardloop.contracts.payloads import (
    AnalyzeInput,
    AnalyzeResult,
    BufferInfo,
    BuffersInput,
    PlanInput,
    PlanResult,
    ResearchResult,
    SynthesizeInput,
)
from cardloop.integrations.research.index import INDEX_BYTES_PER_TEXT_BYTE, INDEXES, ChunkIndex, index_key
from cardloop.prompts.conversation import Conversation, SystemBlock, ToolUse, Turn
from cardloop.prompts.isolate import wrap_untrusted
from cardloop.prompts.research.chunks import Buffer, line_count, split_chunks
from cardloop.prompts.research.findings import ChunkFindings, parse_findings, parse_queries
from cardloop.store import UsageRecord

# Provider refusals that are about one batch's text (a content filter, a prompt block, a batch
# over the model's window), not about the account or the configuration: the batch is skipped
# and counted like a malformed one, and the other batches' paid findings still make the report.
BATCH_REFUSALS = frozenset({"invalid_request", "blocked", "too_large"})

RETRY_NOTE = ("Your reply was not valid JSON in the required shape. Answer again with only the JSON list, "
              "one object per chunk id given.")


@dataclass(frozen=True)
class Reply:
    """A model reply as the store holds it, with the usage of the call that produced it."""

    text: str
    tool_calls: tuple[ToolUse, ...]
    input_tokens: int
    output_tokens: int
    cost_usd: float


class ModelCalls:
    """Keyed, billed, exactly-once model calls on behalf of one card."""

    def __init__(self, rt: ActivityDeps, card_key: str, tenant: str, stage: str) -> None:
        self.rt, self.card_key, self.tenant, self.stage = rt, card_key, tenant, stage

    def call(self, key: str, conv: Conversation, *, profile: str, model: str, max_tokens: int,
             temperature: float, detail: str) -> Reply:
        rt = self.rt
        attempt = activity.info().attempt if activity.in_activity() else 1

        def act() -> tuple[str, UsageRecord]:
            provider = provider_for(rt, profile)
            row = UsageRecord(call_key=key, attempt=attempt, retry=attempt > 1, kept=False, card_key=self.card_key,
                              tenant=self.tenant, stage=self.stage, profile=profile,
                              provider=rt.config.profiles[profile].provider, model=model, purpose="research",
                              created_at=datetime.now(UTC))
            reserve = rt.reservation(model, rt.prompt_tokens(model, conv), max_tokens)
            done, billed = billed_call(rt, row, lambda: provider.complete(conv, model=model, max_tokens=max_tokens,
                                                                          temperature=temperature), detail=detail,
                                       conversation=conv, reserve=reserve)
            calls = [{"id": c.id, "name": c.name, "input": dict(c.input)} for c in done.tool_calls]
            return json.dumps({"text": done.text, "tool_calls": calls}, ensure_ascii=False), billed

        stored = exactly_once(lambda: rt.store.effect(self.card_key, key), act,
                              lambda made: rt.store.record_effect(self.card_key, key, "research_call", *made),
                              what=f"research call {key}").value
        recorded(rt, self.card_key, key)
        body = json.loads(stored.result)
        u = stored.usage
        return Reply(body["text"], tuple(ToolUse(c["id"], c["name"], c["input"]) for c in body["tool_calls"]),
                     u.input_tokens + u.cache_read_tokens + u.cache_write_tokens if u else 0,
                     u.output_tokens if u else 0, float(u.cost_usd) if u else 0.0)


def stored_buffers(rt: ActivityDeps, card_key: str, buffer_ids: Sequence[int]) -> list[Buffer]:
    wanted = set(buffer_ids)
    buffers = [b for b in rt.store.buffers(card_key) if b.buffer_id in wanted]
    if len(buffers) != len(wanted):
        raise invalid_input(f"buffers {sorted(wanted - {b.buffer_id for b in buffers})} of {card_key} are not stored")
    return buffers


def index_of(rt: ActivityDeps, card_key: str, tenant: str, buffers: Sequence[Buffer]) -> ChunkIndex:
    """The buffers' index from this worker's cache, built when missing (blocking; any thread)."""
    def build() -> ChunkIndex:
        texts = {b.buffer_id: rt.store.get_blob(b.blob_ref, tenant=tenant) for b in buffers}
        return ChunkIndex(buffers, rt.store.chunks(card_key, sorted(b.buffer_id for b in buffers)), texts)

    # A log's index weighs about twice its text and more for a small one (index.nbytes):
    # room for that is made before the build.
    return INDEXES.get_or_build(index_key(tenant, card_key, buffers), build,
                                expected_bytes=INDEX_BYTES_PER_TEXT_BYTE * sum(b.size for b in buffers))


def load_index(rt: ActivityDeps, card_key: str, tenant: str, buffer_ids: Sequence[int]) -> ChunkIndex:
    buffers = stored_buffers(rt, card_key, buffer_ids)
    return call_with_heartbeat(lambda: index_of(rt, card_key, tenant, buffers), detail="indexing the research chunks")


# Index builds that run while the planner's model call is out (see plan). A few threads: each
# build holds a whole log, and the GIL makes more of them no faster.
_INDEXING = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="research-index")


class ResearchActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt
        # The worker's memory bound for the indexes it keeps between a run's activities.
        INDEXES.resize(max_bytes=rt.config.research.index_cache_mb * 2**20)

    @activity.defn(name=names.RESEARCH_BUFFERS)
    def buffers(self, inp: BuffersInput) -> list[BufferInfo]:
        rt = self.rt
        card = stored_card(rt.store, inp.card_key)
        counter = rt.assembler.counter
        out = []
        for blob in inp.blobs:
            found = rt.store.find_buffer(inp.card_key, blob.name, blob.ref, inp.chunk_tokens, inp.overlap_lines)
            if found is None:
                text = rt.store.get_blob(blob.ref, tenant=card.tenant)
                spans = call_with_heartbeat(lambda t=text: split_chunks(t, counter.count, inp.chunk_tokens,
                                                                        inp.overlap_lines,
                                                                        splits_at_lines=counter.splits_at_lines),
                                            detail=f"chunking {blob.name}")
                found = rt.store.put_buffer(inp.card_key, blob.name, blob.ref, spans, size=len(text.encode()),
                                            lines=line_count(text),
                                            chunk_tokens=inp.chunk_tokens, overlap_lines=inp.overlap_lines)
            out.append(BufferInfo(buffer_id=found.buffer_id, name=found.name, lines=found.lines, tokens=found.tokens,
                                  chunks=found.chunks))
        return out

    @activity.defn(name=names.RESEARCH_PLAN)
    @bounded_attempts  # [retry] in config.toml decides when a failing model call stops
    def plan(self, inp: PlanInput) -> PlanResult:
        rt = self.rt
        card = stored_card(rt.store, inp.card_key)
        s = inp.settings

        def act() -> PlanResult:
            buffers = stored_buffers(rt, inp.card_key, inp.buffer_ids)
            # Why in the background: the index takes seconds for a large log and is not needed
            # before the planner answers, which takes seconds too. A failed call leaves the build
            # to finish into the cache, where the next attempt finds it.
            building = _INDEXING.submit(index_of, rt, inp.card_key, card.tenant, buffers)
            system = rt.assembler.templates.load("research_planner").render({"max_queries": s.max_queries})
            names_ = ", ".join(b.name for b in buffers)
            user = wrap_untrusted(rt.assembler.scrubber.scrub(inp.question), kind="question", source="research") \
                + f"\n\nArtifacts: {rt.assembler.scrubber.scrub(names_)}\nWrite the search queries now."
            conv = Conversation(system=(SystemBlock(system),), turns=(Turn("user", user),))
            reply = ModelCalls(rt, inp.card_key, card.tenant, inp.stage).call(
                f"{inp.key}/plan", conv, profile=s.synthesizer_profile, model=s.synthesizer_model,
                max_tokens=500, temperature=0.0, detail="research: planning the search")
            # The question's own words search too: a planner that answers badly still finds something.
            queries = parse_queries(reply.text, s.max_queries)
            index = call_with_heartbeat(building.result, detail="indexing the research chunks")
            selected = call_with_heartbeat(lambda: index.select([*queries, inp.question], s.max_chunks),
                                           detail="research: selecting chunks")
            return PlanResult(queries=queries, chunk_ids=sorted(selected), chunks_total=len(index.chunks),
                              input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                              cost_usd=reply.cost_usd)

        return recorded_once(rt.store, inp.card_key, f"{inp.key}/plan-result", "research_plan", PlanResult, act)

    @activity.defn(name=names.RESEARCH_ANALYZE)
    @bounded_attempts  # [retry] in config.toml decides when a failing model call stops
    def analyze(self, inp: AnalyzeInput) -> AnalyzeResult:
        rt = self.rt
        card = stored_card(rt.store, inp.card_key)
        if not inp.chunk_ids:
            raise invalid_input("an analyst batch needs at least one chunk")
        s = inp.settings

        def act() -> AnalyzeResult:
            index = load_index(rt, inp.card_key, card.tenant, inp.buffer_ids)
            scrub = rt.assembler.scrubber.scrub
            blocks = [wrap_untrusted(scrub(index.text(cid)), kind="log_chunk", source=index.where(cid),
                                     chunk_id=str(cid)) for cid in inp.chunk_ids if cid in index.chunks]
            user = (wrap_untrusted(scrub(inp.question), kind="question", source="research") + "\n\n"
                    + "\n\n".join(blocks)
                    + f"\n\nAnswer with the JSON list for chunk ids {', '.join(map(str, inp.chunk_ids))} now.")
            system = rt.assembler.templates.load("analyst").render({})
            turns = [Turn("user", user)]
            calls = ModelCalls(rt, inp.card_key, card.tenant, inp.stage)
            used: list[Reply] = []
            verdicts: list[ChunkFindings] | None = None
            refused = ""
            for attempt in (1, 2):  # a malformed reply is asked again once, then the batch is skipped
                conv = Conversation(system=(SystemBlock(system, cache=True),), turns=tuple(turns))
                try:
                    reply = calls.call(f"{inp.key}/a{attempt}", conv, profile=s.analyst_profile,
                                       model=s.analyst_model, max_tokens=s.analyst_max_tokens,
                                       temperature=s.analyst_temperature,
                                       detail=f"research: analysing chunks {inp.chunk_ids[0]}-{inp.chunk_ids[-1]}")
                except ApplicationError as err:
                    if not (err.type == names.PROVIDER_REJECTED and err.details and err.details[0] in BATCH_REFUSALS):
                        raise
                    refused = str(err.message)[:400]
                    break
                used.append(reply)
                verdicts = parse_findings(reply.text, inp.chunk_ids)
                if verdicts is not None:
                    break
                turns += [Turn("assistant", reply.text or "(empty)"), Turn("user", RETRY_NOTE)]
            tally = dict(calls=len(used), chunks=len(inp.chunk_ids), input_tokens=sum(r.input_tokens for r in used),
                         output_tokens=sum(r.output_tokens for r in used), cost_usd=sum(r.cost_usd for r in used))
            if refused:
                activity.logger.warning("analyst batch %s: the provider refused it; skipped: %s", inp.key, refused)
                return AnalyzeResult(status="skipped", reason=f"{names.RESEARCH_BATCH_REFUSED}: {refused}", **tally)
            if verdicts is None:
                activity.logger.warning("analyst batch %s: no valid findings after a retry; skipped", inp.key)
                return AnalyzeResult(status="skipped", reason="malformed reply twice", **tally)
            rt.store.record_effect(inp.card_key, f"{inp.key}/findings", "research_findings",
                                   json.dumps([v.model_dump(mode="json") for v in verdicts], ensure_ascii=False))
            relevant = [v for v in verdicts if v.relevance != "none"]
            return AnalyzeResult(status="ok", relevant=len(relevant), findings=sum(len(v.findings) for v in relevant),
                                 **tally)

        return recorded_once(rt.store, inp.card_key, f"{inp.key}/result", "research_batch", AnalyzeResult, act)

    @activity.defn(name=names.RESEARCH_SYNTHESIZE)
    @bounded_attempts  # [retry] in config.toml decides when a failing model call stops
    def synthesize(self, inp: SynthesizeInput) -> ResearchResult:
        rt = self.rt
        card = stored_card(rt.store, inp.card_key)

        def act() -> ResearchResult:
            index = load_index(rt, inp.card_key, card.tenant, inp.buffer_ids)
            verdicts: list[ChunkFindings] = []
            for key in inp.batch_keys:
                found = rt.store.effect(inp.card_key, f"{key}/findings")
                if found is not None:
                    verdicts += [ChunkFindings.model_validate(v) for v in json.loads(found.result)]
            synth = Synthesizer(rt, ModelCalls(rt, inp.card_key, card.tenant, inp.stage), index, inp)
            return synth.run(verdicts, card.tenant)

        return recorded_once(rt.store, inp.card_key, f"{inp.key}/report", "research_report", ResearchResult, act)
