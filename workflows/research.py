"""ResearchWorkflow: a question over artifacts too large for any prompt (issue 14), as a child
workflow whose activities the Temporal UI lists one by one: buffers, plan, one analyst
activity per batch of chunks (at most `concurrency` at once), then the synthesizer.

Deterministic: the batches are cut from the plan's stored chunk selection, every activity is
keyed by this workflow's id, and large things (chunk text, findings, the report) stay in the
store; the result carries the report's blob ref and the run's figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        AnalyzeInput,
        AnalyzeResult,
        AppendInput,
        BufferInfo,
        BuffersInput,
        GatherResult,
        NamedBlob,
        PlanInput,
        PlanResult,
        ResearchInput,
        ResearchProgress,
        ResearchResult,
        StageInput,
        SynthesizeInput,
        ToolCallOut,
        ToolOutcome,
    )
    from cardloop.workflows import policies, versions
    from cardloop.workflows.kept import kept_under


@workflow.defn(name=names.RESEARCH_WORKFLOW)
class ResearchWorkflow:
    def __init__(self) -> None:
        self.progress = ResearchProgress()

    @workflow.query(name=names.QUERY_PROGRESS)
    def get_progress(self) -> ResearchProgress:
        return self.progress

    @workflow.run
    async def run(self, inp: ResearchInput) -> ResearchResult:
        versions.decide_at_start()  # none of its own yet: a later patch of research lands on it
        s, p = inp.settings, self.progress
        wid = workflow.info().workflow_id
        self._phase("storing and chunking the artifacts")
        buffers = await workflow.execute_activity(
            names.RESEARCH_BUFFERS,
            BuffersInput(card_key=inp.card_key, blobs=inp.blobs, chunk_tokens=s.chunk_tokens,
                         overlap_lines=s.overlap_lines),
            result_type=list[BufferInfo], **policies.RESEARCH_PREPARE,
            summary=f"buffers: {', '.join(b.name for b in inp.blobs)[:180]}")
        buffer_ids = [b.buffer_id for b in buffers]
        p.chunks_total = sum(b.chunks for b in buffers)
        self._phase("planning the search")
        plan = await workflow.execute_activity(
            names.RESEARCH_PLAN,
            PlanInput(card_key=inp.card_key, key=wid, question=inp.question, buffer_ids=buffer_ids, settings=s,
                      stage=inp.stage),
            result_type=PlanResult, **policies.LLM,
            summary=f"plan: queries and chunk selection ({s.synthesizer_model})")
        self._add(plan.input_tokens, plan.output_tokens)
        batches = [plan.chunk_ids[i:i + s.batch_chunks] for i in range(0, len(plan.chunk_ids), s.batch_chunks)]
        p.batches_total = len(batches)
        self._phase(f"analysing {len(plan.chunk_ids)} of {plan.chunks_total} chunks in {len(batches)} batches")
        gate = asyncio.Semaphore(s.concurrency)

        async def analyst(n: int, chunk_ids: list[int]) -> AnalyzeResult:
            async with gate:
                done = await workflow.execute_activity(
                    names.RESEARCH_ANALYZE,
                    AnalyzeInput(card_key=inp.card_key, key=f"{wid}/batch-{n}", question=inp.question,
                                 buffer_ids=buffer_ids, chunk_ids=chunk_ids, settings=s, stage=inp.stage),
                    result_type=AnalyzeResult, **policies.LLM,
                    summary=f"analyst batch {n + 1} of {len(batches)}: chunks {chunk_ids[0]}-{chunk_ids[-1]}")
            p.batches_done += 1
            p.batches_skipped += done.status == "skipped"
            self._add(done.input_tokens, done.output_tokens)
            return done

        analysed = await asyncio.gather(*(analyst(n, ids) for n, ids in enumerate(batches)))
        refused = names.RESEARCH_BATCH_REFUSED
        refusals = [r.reason for r in analysed if r.status == "skipped" and r.reason.startswith(refused)]
        if refusals and all(r.status == "skipped" for r in analysed):
            # Every batch refused: the model or its settings, not the text (a report of nothing would hide it).
            raise ApplicationError(f"every analyst batch was skipped, {len(refusals)} of {len(analysed)} "
                                   f"{refusals[0]}", type=names.PROVIDER_REJECTED, non_retryable=True)
        self._phase("synthesizing the report")
        report = await workflow.execute_activity(
            names.RESEARCH_SYNTHESIZE,
            SynthesizeInput(card_key=inp.card_key, key=wid, question=inp.question, buffer_ids=buffer_ids,
                            batch_keys=[f"{wid}/batch-{n}" for n, r in enumerate(analysed) if r.status == "ok"],
                            chunks_total=plan.chunks_total, batches_skipped=p.batches_skipped, settings=s,
                            stage=inp.stage, attach=inp.attach, workflow_id=wid),
            result_type=ResearchResult, **policies.LLM, summary=f"synthesize the report ({s.synthesizer_model})")
        self._add(report.input_tokens, report.output_tokens)
        self._phase("done")
        return report.model_copy(update={
            "queries": plan.queries, "batches": len(batches), "analyst_calls": sum(r.calls for r in analysed),
            "input_tokens": p.input_tokens, "output_tokens": p.output_tokens,
            "cost_usd": plan.cost_usd + sum(r.cost_usd for r in analysed) + report.cost_usd})

    def _add(self, tokens_in: int, tokens_out: int) -> None:
        self.progress.input_tokens += tokens_in
        self.progress.output_tokens += tokens_out

    def _phase(self, doing: str) -> None:
        p = self.progress
        p.phase = doing
        workflow.set_current_details(
            f"**research**: {doing}. Analyst batches {p.batches_done} of {p.batches_total}"
            + (f" ({p.batches_skipped} skipped)" if p.batches_skipped else "")
            + f"; tokens {p.input_tokens:,} in, {p.output_tokens:,} out.")


# What error fixing asks of a log it cannot read whole. Fixed text, not the card's: the card is
# in the prompt already, and a question built from it would carry untrusted text into a workflow input.
ERROR_FIXING_QUESTION = ("Why did this build or deployment fail? Name each root cause with its exact error message, "
                         "the failing step, test or component, and what would fix it.")


async def research_large_logs(inp: StageInput, gathered: list[GatherResult],
                              spent: Callable[[ResearchResult | None], None]) -> None:
    """Research the gathered logs over the stage's threshold as a child workflow; its report
    becomes the card's research context item, and `spent` is told what it cost. A failed
    research never fails the stage: the prompt then has the logs' excerpts only, as before."""
    s = inp.settings
    logs = [log for g in gathered for log in g.logs if log.tokens > s.research_min_tokens]
    if not logs or s.research is None:
        return
    wid = f"{workflow.info().workflow_id}/research"
    try:
        done = await workflow.execute_child_workflow(
            names.RESEARCH_WORKFLOW,
            ResearchInput(card_key=inp.ref.key, question=ERROR_FIXING_QUESTION, blobs=logs[:8], settings=s.research,
                          stage=inp.stage, attach=True),
            id=wid, result_type=ResearchResult)
    except ChildWorkflowError as err:
        workflow.logger.warning("research over %d log(s) failed; the prompt keeps their excerpts: %s",
                                len(logs), err.cause or err)
        await _failed_research(inp, wid, err, spent)
        return
    spent(done)


async def _failed_research(inp: StageInput, wid: str, err: ChildWorkflowError,
                           spent: Callable[[ResearchResult], None] | None) -> None:
    """A research that failed or was cancelled returns no figures, yet the calls it made are
    billed: what it kept is read back from the ledger (its calls are keyed by `wid`) and told
    to `spent`. A stage cancelled while its research ran ends cancelled, as it would have had
    any other step been running (the child's cancellation took the stage's cancel)."""
    if not versions.patched(versions.RESEARCH_FAILED_IN_RUN_COST):
        return
    if spent is not None:
        paid = await kept_under(inp.ref.key, wid, "research")
        # Tokens as a research's result counts them (activities/research.py): cached ones are input.
        spent(ResearchResult(input_tokens=paid.input_tokens + paid.cache_read_tokens + paid.cache_write_tokens,
                             output_tokens=paid.output_tokens, cost_usd=paid.cost_usd))
    if isinstance(err.cause, CancelledError) and workflow.cancellation_reason() is not None:
        raise asyncio.CancelledError("cancelled while researching")


async def research_tool(inp: StageInput, logs: list[NamedBlob], call: ToolCallOut, iteration: int,
                        spent: Callable[[ResearchResult], None] | None = None) -> ToolOutcome:
    """The agent's research tool: its question over this run's gathered logs, as a child workflow;
    the report (or why there is none) is the call's result in the card's history, and `spent`
    is told what the research cost."""
    question = str(call.input.get("question") or "").strip()[:4_000]
    wid = workflow.info().workflow_id
    text, is_error = "", True
    if not question:
        text = "research: give a question (the 'question' argument)"
    elif not logs:
        text = "research: this stage run gathered no logs to research (no build or pod logs were found)"
    else:
        child = f"{wid}/research-{iteration}-{call.id}"
        try:
            done = await workflow.execute_child_workflow(
                names.RESEARCH_WORKFLOW,
                ResearchInput(card_key=inp.ref.key, question=question, blobs=logs[:8], settings=inp.settings.research,
                              stage=inp.stage),
                id=child, result_type=ResearchResult)
            if spent is not None:
                spent(done)
            text, is_error = (done.excerpt + f"\n\n(research over {', '.join(done.buffers)}: {done.chunks_analysed} "
                              f"of {done.chunks_total} chunks analysed)"), False
        except ChildWorkflowError as err:
            await _failed_research(inp, child, err, spent)
            text = f"research failed: {err.cause or err}"[:2_000]
    seq = await workflow.execute_activity(
        names.APPEND,
        AppendInput(card_key=inp.ref.key, role="tool", tool_call_id=call.id, is_error=is_error, stage=inp.stage,
                    dedup_key=f"{wid}/tool-{iteration}-{call.id}", text=text[:32_000]),
        result_type=int, **policies.STORE, summary=f"{inp.stage} turn {iteration}: research result")
    return ToolOutcome(message_seq=seq, is_error=is_error, excerpt=text[:300])
