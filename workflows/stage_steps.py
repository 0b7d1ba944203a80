"""The steps of a stage run's turn besides the model call: gathering context, assembling the
prompt (a local activity), summarizing the history when it must be folded, and telling the card
workflow how far the run is."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        AssembleInput,
        AssembleResult,
        GatherInput,
        GatherResult,
        StageInput,
        SummarizeInput,
        SummarizeResult,
    )
    from cardloop.workflows import policies, versions
    from cardloop.workflows.kept import kept_under
    from cardloop.workflows.stage_record import StageRecord


class StageSteps(StageRecord):
    async def _gather(self, inp: StageInput) -> list[GatherResult]:
        """All of the stage's sources at once; each one's failure is recorded, never fatal."""
        results = await asyncio.gather(*(
            workflow.execute_activity(
                names.GATHER,
                GatherInput(card_key=inp.ref.key, stage=inp.stage, source=name,
                            max_attempts=policies.GATHER_ATTEMPTS),
                result_type=GatherResult,
                **policies.GATHER,
                summary=f"gather context: {name}",
            ) for name in inp.settings.sources), return_exceptions=True)
        done = []
        for name, result in zip(inp.settings.sources, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):  # a deterministic failure (e.g. bad config): go on without it
                workflow.logger.warning("context source %s failed: %s", name, result)
            else:
                done.append(result)
        return done

    async def _report(self, inp: StageInput) -> None:
        """Tell the card workflow after each turn, so its state query and details are live."""
        parent = workflow.info().parent
        if parent is None:
            return
        handle = workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id)
        try:
            await handle.signal(names.SIGNAL_STAGE_PROGRESS, self.progress)
        except Exception as err:  # the card workflow moved on (continued as new); progress is advisory
            workflow.logger.info("progress not delivered: %s", err)
        # A cancel (a move, `card cancel`) that lands while this signal is in flight is taken by
        # the signal's await: the SDK lets the signal finish and clears the task's cancel, and the
        # stage ran on to its budget. Honour it here; runs recorded so replay without it.
        if workflow.cancellation_reason() is not None and versions.patched(versions.CANCEL_DURING_REPORT):
            raise asyncio.CancelledError("cancelled while reporting progress")

    async def _assemble(self, inp: StageInput, iteration: int, tools: list[str]) -> AssembleResult:
        return await workflow.execute_local_activity(
            names.ASSEMBLE,
            AssembleInput(card_key=inp.ref.key, stage=inp.stage, run=inp.run, iteration=iteration,
                          profile=inp.settings.profile, tools=tools, run_key=workflow.info().workflow_id),
            result_type=AssembleResult,
            **policies.assembly(inp.settings.assemble_timeout),
            summary=f"{inp.stage} turn {iteration}: assemble prompt",
        )

    async def _summarize(self, inp: StageInput, prompt: AssembleResult) -> bool:
        """True when a summary is now cached; False means the truncated prompt stands."""
        fold = prompt.fold
        assert fold is not None
        # The summarizer's calls are keyed under this (one summarize per turn), so a summarize
        # that fails after some of them can be read back from the ledger.
        keyed = versions.patched(versions.SUMMARY_FAILED_IN_RUN_COST)
        key = f"{workflow.info().workflow_id}/summary-{self.progress.iteration}" if keyed else ""
        try:
            done = await workflow.execute_activity(
                names.SUMMARIZE,
                SummarizeInput(card_key=inp.ref.key, first=fold.first, last=fold.last, max_tokens=fold.max_tokens,
                               key=key),
                result_type=SummarizeResult,
                **policies.SUMMARIZE,
                summary=f"summarize messages {fold.first + 1}-{fold.last + 1}",
            )
        except ActivityError as err:
            if keyed:
                # Its chunks summarized before it failed (or was cancelled) are billed: the run pays them.
                self._summary_spent(await kept_under(inp.ref.key, key, "summarize"))
                if isinstance(err.cause, CancelledError) and workflow.cancellation_reason() is not None:
                    raise  # the stage was cancelled: it ends cancelled, not on a truncated turn
            # The assembled prompt already holds the truncated history: use it, and say so.
            workflow.logger.warning("summarizer failed, history truncated instead: %s", err.cause or err)
            self.progress.truncated_turns += 1
            return False
        self._summary_spent(done)
        return True
