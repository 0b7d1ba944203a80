"""The synthesizer's passes inside research.synthesize: findings -> one markdown report.

One pass when the findings fit the synthesizer's window; otherwise one scoped pass per group
(by chunk locality, named by theme) and a meta-synthesis of the group reports. Each pass may
call the research tools (only the model's structured tool_use blocks run; text in findings
that looks like a tool call is data). The report is stored as a blob; with `attach` it also
becomes the card's research context item, with its provenance (buffers, chunks read)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardloop.activities.deps import ActivityDeps
from cardloop.contracts.payloads import ResearchResult, SynthesizeInput
from cardloop.integrations.research.index import ChunkIndex
from cardloop.integrations.research.tools import SPECS, ResearchTools
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.conversation import Conversation, SystemBlock, ToolOutput, Turn
from cardloop.prompts.research.findings import ChunkFindings, MergedFinding, merge_findings
from cardloop.prompts.research.synthesis import (
    SCOPED,
    Coverage,
    findings_block,
    group_findings,
    partials_block,
    theme,
)

if TYPE_CHECKING:
    from cardloop.activities.research import ModelCalls

RESEARCH_SOURCE = "cardloop:research"
# The report travels in the result up to this size (the research tool's answer; well under a payload's limit).
EXCERPT_CHARS = 16_000
FINAL_NOTE = "Tools are no longer available: write the report now from what you have."


class Synthesizer:
    def __init__(self, rt: ActivityDeps, calls: ModelCalls, index: ChunkIndex, inp: SynthesizeInput) -> None:
        self.rt, self.calls, self.index, self.inp = rt, calls, index, inp
        self.count = rt.assembler.counter.count
        self.passes = 0
        self.question = inp.question
        self.input_tokens = self.output_tokens = 0
        self.cost = 0.0

    def run(self, verdicts: list[ChunkFindings], tenant: str) -> ResearchResult:
        inp, index = self.inp, self.index
        kept, merged = merge_findings(verdicts)
        analysed = frozenset(v.chunk_id for v in verdicts)
        tools = ResearchTools(index, analysed)
        coverage = Coverage(chunks_total=inp.chunks_total or len(index.chunks), chunks_analysed=len(analysed),
                            batches_skipped=inp.batches_skipped,
                            buffers=tuple(f"{b.name} (buffer {b.buffer_id}): {b.lines:,} lines, ~{b.tokens:,} tokens, "
                                          f"{b.chunks} chunks" for b in index.buffers.values()))
        system = self.rt.assembler.templates.load("synthesizer").render({})
        question = self.question = self.rt.assembler.scrubber.scrub(inp.question)
        block = findings_block(question, merged, kept, coverage, where=index.where)
        groups: list[list[MergedFinding]] = []
        if self.count(block) <= inp.settings.synthesizer_window:
            report = self._pass(system, block, f"{inp.key}/s", tools)
        else:
            groups = group_findings(merged, inp.settings.synthesizer_window * 3 // 4, self.count)
            partials = []
            for i, group in enumerate(groups):
                ids = {cid for f in group for cid in f.chunk_ids}
                topic = theme(group)
                part = findings_block(question, group, [v for v in kept if v.chunk_id in ids], coverage,
                                      where=index.where)
                partials.append((topic, self._pass(f"{system}\n\n{SCOPED.format(topic=topic)}", part,
                                                   f"{inp.key}/g{i}", tools)))
            report = self._pass(system, self._fit(question, partials, coverage), f"{inp.key}/meta", tools)
        report = report.strip() or "The synthesizer returned no report."
        read = sorted(analysed | tools.chunks_read)
        ref = self.rt.store.put_blob(tenant, report, "research_report")
        if inp.attach:
            self.rt.store.put_context_items(inp.card_key, [self._item(report, read)])
        return ResearchResult(
            report_ref=ref, excerpt=report[:EXCERPT_CHARS], chunks_total=coverage.chunks_total,
            chunks_analysed=len(analysed),
            chunks_read=read[:2_000], buffers=[b.name for b in index.buffers.values()],
            batches_skipped=inp.batches_skipped, synthesizer_calls=self.passes, tool_calls=tools.calls,
            groups=len(groups), input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost_usd=self.cost)

    def _fit(self, question: str, partials: list[tuple[str, str]], coverage: Coverage) -> str:
        """The meta turn, each group report cut evenly until the whole fits the window."""
        block = partials_block(question, partials, coverage)
        window = self.inp.settings.synthesizer_window
        while self.count(block) > window and any(len(t) > 400 for _, t in partials):
            partials = [(topic, text[: max(400, len(text) * 3 // 4)]) for topic, text in partials]
            block = partials_block(question, partials, coverage)
        return block

    def _pass(self, system: str, user: str, key: str, tools: ResearchTools) -> str:
        """One synthesis: model turns with tool calls until it writes (max_tool_rounds)."""
        s = self.inp.settings
        turns = [Turn("user", user)]
        for round_ in range(s.max_tool_rounds + 1):
            offer = round_ < s.max_tool_rounds
            # Tools stay declared on the last round (a history with tool calls needs them); the
            # note asks for the report, and a tool call then is not run.
            conv = Conversation(system=(SystemBlock(system, cache=True),), turns=tuple(turns), tools=SPECS)
            reply = self.calls.call(f"{key}/r{round_}", conv, profile=s.synthesizer_profile,
                                    model=s.synthesizer_model, max_tokens=s.synthesizer_max_tokens,
                                    temperature=s.synthesizer_temperature, detail="research: synthesizing")
            self.passes += 1
            self.input_tokens += reply.input_tokens
            self.output_tokens += reply.output_tokens
            self.cost += reply.cost_usd
            if not reply.tool_calls or not offer:
                return reply.text
            outputs = tuple(ToolOutput(c.id, *tools.run(c.name, c.input)) for c in reply.tool_calls)
            turns += [Turn("assistant", reply.text, tool_calls=reply.tool_calls),
                      Turn("user", "", tool_results=outputs)]
            if round_ + 1 == s.max_tool_rounds:
                turns[-1] = Turn("user", FINAL_NOTE, tool_results=outputs)
        return ""

    def _item(self, report: str, read: list[int]) -> ContextItem:
        """The report as the card's context, with what it rests on."""
        index, inp = self.index, self.inp
        spans = ", ".join(index.where(cid) for cid in read[:30]) + (f", … ({len(read) - 30} more)" if len(read) > 30
                                                                    else "")
        buffers = "; ".join(f"{b.name} ({b.lines:,} lines, ~{b.tokens:,} tokens)" for b in index.buffers.values())
        provenance = (f"\n\n---\nResearch provenance: question: {self.question[:300]}\nBuffers: {buffers}\n"
                      f"Chunks read ({len(read)} of {len(index.chunks)}): {spans}"
                      + (f"\nAnalyst batches skipped (no usable answer): {inp.batches_skipped}"
                         if inp.batches_skipped else ""))
        return ContextItem(kind=ContextKind.RESEARCH, source=RESEARCH_SOURCE,
                           title=f"Research report: {self.question[:200]}", content=report + provenance)
