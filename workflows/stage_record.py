"""What a stage run has spent and how it ends: the run's progress (the card workflow's view of
it), the Temporal UI's current details, and the StageRun it returns. The base of StageWorkflow's
parts (stage_steps.py, stage_finish.py); it runs no activity."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts.payloads import (
        KeptUsage,
        NamedBlob,
        ResearchResult,
        StageInput,
        StageProgress,
        StageRun,
        SummarizeResult,
    )
    from cardloop.workflows import versions
    from cardloop.workflows.workspace import Hands


class StageRecord:
    def __init__(self) -> None:
        self.progress = StageProgress()
        self._verification = ""  # the last verification's note: the pull request's evidence
        self._hands: Hands | None = None
        self._logs: list[NamedBlob] = []  # the whole logs this run's context sources kept (research reads them)

    def _kept(self, hands: Hands | None) -> str:
        p = self.progress
        if hands is None or not p.last_commit:
            return ""
        return f"; the work is kept on {hands.info.branch} at {p.last_commit[:12]}"

    def _summary_spent(self, done: SummarizeResult | KeptUsage) -> None:
        p = self.progress
        p.cost_usd += done.cost_usd
        p.summary_input_tokens += done.input_tokens
        p.summary_output_tokens += done.output_tokens
        p.cache_read_tokens += done.cache_read_tokens
        p.cache_write_tokens += done.cache_write_tokens

    def _research_spent(self, done: ResearchResult | None) -> None:
        """Research is billed under the stage: its cost joins the run's (and so the cost budget's)."""
        if done is None or not versions.patched(versions.RESEARCH_IN_RUN_COST):
            return
        p = self.progress
        p.cost_usd += done.cost_usd
        p.research_input_tokens += done.input_tokens
        p.research_output_tokens += done.output_tokens

    def _details(self, inp: StageInput, doing: str) -> None:
        p = self.progress
        # For the progress query (`card show`); no command depends on them.
        p.doing, p.max_iterations, p.token_budget = doing, inp.settings.max_iterations, inp.settings.token_budget
        workflow.set_current_details(
            f"**{inp.stage}** run {inp.run}, iteration {p.iteration} of {inp.settings.max_iterations}: {doing}. "
            f"Tokens so far: {p.input_tokens:,} in, {p.output_tokens:,} out; cost ${p.cost_usd:.4f}."
        )

    def _failed(self, inp: StageInput, reason: str, *, transient: bool) -> StageRun:
        """Retries are spent or the failure is deterministic; a transient one the card may retry."""
        return self._done(inp, "failed", reason).model_copy(update={"transient": transient})

    def _done(self, inp: StageInput, outcome: str, reason: str) -> StageRun:
        p = self.progress
        workflow.set_current_details(f"**{inp.stage}** run {inp.run}: {outcome} after {p.iteration} "
                                     f"iteration(s): {reason}. Cost ${p.cost_usd:.4f}.")
        if p.truncated_turns:
            reason += f" ({p.truncated_turns} turn(s) ran on truncated history: the summarizer failed)"
        if p.cut_replies:
            reason += (f" ({p.cut_replies} of its {p.iteration} replies were cut off at the model's output limit: "
                       "max_tokens of the stage or its profile)")
        return StageRun(stage=inp.stage, run=inp.run, outcome=outcome, reason=reason, iterations=p.iteration,
                        input_tokens=p.input_tokens, output_tokens=p.output_tokens, cost_usd=p.cost_usd,
                        truncated_turns=p.truncated_turns, tool_calls=p.tool_calls, commits=p.commits,
                        last_commit=p.last_commit, summary_input_tokens=p.summary_input_tokens,
                        summary_output_tokens=p.summary_output_tokens, cache_read_tokens=p.cache_read_tokens,
                        cache_write_tokens=p.cache_write_tokens, research_input_tokens=p.research_input_tokens,
                        research_output_tokens=p.research_output_tokens)
