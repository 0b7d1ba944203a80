"""StageWorkflow: the agent loop of one stage run ("Ralph loop").

Each turn: assemble the prompt (local activity), summarize the history first when it must
be folded and no summary is cached, call the model (activity; it records the reply in the
chat history and the usage), then act on the reply. The loop ends when the reply carries
<promise>COMPLETE</promise> or <promise>BLOCKED</promise>, or when the iteration or token
budget of the stage is spent.

The loop is here; its parts are beside it: the turn's other steps (context, prompt, summary,
progress) in stage_steps.py, the evidence and delivery of the outcome in stage_finish.py, and
what the run spent and how it ends in stage_record.py.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as TemporalTimeout

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        CompleteInput,
        CompleteResult,
        StageInput,
        StageProgress,
        StageRun,
        tokens_spent,
    )
    from cardloop.workflows import policies, versions
    from cardloop.workflows.failures import is_transient, root_cause, root_message
    from cardloop.workflows.research import research_large_logs, research_tool
    from cardloop.workflows.stage_finish import StageFinish
    from cardloop.workflows.stage_steps import StageSteps
    from cardloop.workflows.workspace import Hands, StuckWatch, TurnActs


STAGE_OUTCOME = SearchAttributeKey.for_keyword(names.SA_STAGE_OUTCOME)

# Outcomes a person wants to read about on the card's issue or pull request.
COMMENTED = ("completed", "blocked", "budget_exhausted")


@workflow.defn(name=names.STAGE_WORKFLOW)
class StageWorkflow(StageSteps, StageFinish):
    @workflow.query(name=names.QUERY_PROGRESS)
    def get_progress(self) -> StageProgress:
        return self.progress

    @workflow.run
    async def run(self, inp: StageInput) -> StageRun:
        versions.decide_at_start()
        done = await self._run(inp)
        if self.progress.unavailable:
            done = done.model_copy(update={"unavailable": tuple(self.progress.unavailable)})
        hands = self._hands
        if hands is not None and hands.review_comments and done.outcome == "completed" \
                and versions.patched(versions.REVIEW_LINE_COMMENTS):
            done = await self._post_review(inp, hands, done)
        # With board writes the card workflow comments the outcome through the card's board client.
        if self._hands is not None and inp.settings.comment and done.outcome in COMMENTED \
                and not inp.board_comments and versions.patched(versions.OUTCOME_COMMENT):
            done = await self._comment(inp, done)
        if versions.patched(versions.OUTCOME_ATTRIBUTE):
            # The outcome for operators' filters (StageOutcome = 'failed'); a failed run also fails
            # the workflow, so the Temporal UI lists it as Failed, carrying the run for the card.
            workflow.upsert_search_attributes([STAGE_OUTCOME.value_set(done.outcome)])
            if done.outcome == "failed":
                raise ApplicationError(f"{inp.stage} run {inp.run} failed: {done.reason}",
                                       done.model_dump(mode="json"), type=names.STAGE_FAILED, non_retryable=True)
        return done

    async def _run(self, inp: StageInput) -> StageRun:
        s = inp.settings
        p = self.progress
        try:
            if s.sources and versions.patched(versions.CONTEXT_SOURCES):
                self._details(inp, f"gathering context: {', '.join(s.sources)}")
                gathered = await self._gather(inp)
                self._logs = [log for g in gathered for log in g.logs]
                p.unavailable = ([f"{g.source}: {g.reason}"[:600] for g in gathered if g.status == "unavailable"]
                                 # A source that kept what it read but missed a part (one job's or pod's log).
                                 + [f"{g.source} (in part): {'; '.join(g.missing)}"[:600]
                                    for g in gathered if g.status == "ok" and g.missing])[:10]
                # A log too large for any prompt is researched (a child workflow) and the report
                # joins the card's context; histories from before research replay without it.
                if s.research is not None and s.research_min_tokens and versions.patched(versions.RESEARCH_LARGE_LOGS):
                    self._details(inp, "researching logs too large for the prompt")
                    await research_large_logs(inp, gathered, self._research_spent)
            hands: Hands | None = None
            if s.tools:
                self._details(inp, "opening the workspace")
                hands = self._hands = await Hands.open(inp)
                if hands is not None and names.RESEARCH_TOOL in s.tools and s.research is not None:
                    hands.research = lambda call, turn: research_tool(inp, self._logs, call, turn,
                                                                      self._research_spent)
                if hands is not None:
                    self._details(inp, f"workspace on {hands.where}; tests: {hands.info.test_command or 'none found'}; "
                                       f"sandbox: {'; '.join(hands.info.protections) or 'no protections'}")
            tools = s.tools if hands is not None else []
            watch = StuckWatch(s.stuck_repeats, s.stuck_turns)
            for iteration in range(1, s.max_iterations + 1):
                p.iteration = iteration
                self._details(inp, "assembling the prompt")
                prompt = await self._assemble(inp, iteration, tools)
                if prompt.fold is not None:
                    self._details(inp, f"summarizing messages {prompt.fold.first + 1}-{prompt.fold.last + 1}")
                    if await self._summarize(inp, prompt):
                        prompt = await self._assemble(inp, iteration, tools)
                self._details(inp, f"waiting for the model ({prompt.total_tokens:,} prompt tokens)")
                reply = await workflow.execute_activity(
                    names.COMPLETE,
                    CompleteInput(card_key=inp.ref.key, stage=inp.stage, run=inp.run, iteration=iteration,
                                  profile=s.profile, prompt_ref=prompt.prompt_ref,
                                  call_key=f"{workflow.info().workflow_id}/turn-{iteration}"),
                    result_type=CompleteResult,
                    **policies.LLM,
                    summary=f"{inp.stage} turn {iteration}: model call ({s.profile})",
                )
                p.input_tokens += reply.input_tokens
                p.output_tokens += reply.output_tokens
                p.cost_usd += reply.cost_usd
                # Advisory figures (no command depends on them): histories replay unchanged.
                p.cache_read_tokens += reply.cache_read_tokens
                p.cache_write_tokens += reply.cache_write_tokens
                p.cut_replies += reply.stopped == "max_tokens"
                p.last_result = reply.excerpt[:300]
                ends_now = hands is None and reply.promise in ("COMPLETE", "BLOCKED")
                if not (ends_now and versions.patched(versions.QUIET_LAST_TURN)):
                    await self._report(inp)
                promise, reason = reply.promise, reply.reason
                if hands is not None:
                    ended, promise, reason = await self._act(inp, hands, reply, iteration, watch)
                    if ended is not None:
                        return ended
                if promise == "COMPLETE":
                    needs_evidence = hands is not None and s.verify
                    if needs_evidence:
                        refused = await self._verify(inp, hands, iteration)
                        if refused is not None:
                            return refused
                        if p.verified and s.ci_wait_seconds > 0:
                            refused = await self._wait_for_ci(inp, hands, iteration)
                            if refused is not None:
                                return refused
                    if not needs_evidence or p.verified:
                        done = self._done(inp, "completed", reason or "the agent signalled COMPLETE")
                        if hands is not None and s.pull_request:
                            done = await self._pull_request(inp, hands, done)
                        return done
                elif promise == "BLOCKED":
                    return self._done(inp, "blocked", reason or "the agent signalled BLOCKED")
                if hands is not None and (stuck := watch.verdict(s.verify)) is not None:
                    return self._done(inp, "blocked", stuck)
                # The budget limits every token the run spent on the model (the summarizer's, its
                # research's and the cached prompt's too: what its cost and closing line count);
                # runs recorded before counted the turns' uncached input and output only.
                spent = tokens_spent(p) if versions.patched(versions.TOKEN_BUDGET_COUNTS_ALL) \
                    else p.input_tokens + p.output_tokens
                if spent >= s.token_budget:
                    return self._done(inp, "budget_exhausted", f"token budget spent: {spent:,} of {s.token_budget:,}"
                                      + self._kept(hands))
                if s.cost_budget_usd and p.cost_usd >= s.cost_budget_usd:
                    return self._done(inp, "budget_exhausted",
                                      f"cost budget spent: ${p.cost_usd:.4f} of ${s.cost_budget_usd:.4f}"
                                      + self._kept(hands))
            return self._done(inp, "budget_exhausted", f"{s.max_iterations} iterations without COMPLETE"
                              + self._kept(hands))
        except asyncio.CancelledError:
            # Superseded by another transition: everything so far is already in the store.
            return await self._cancelled(inp)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):  # cancelled while an activity ran
                return await self._cancelled(inp)
            # Retries are spent or the failure is deterministic (a 400, a missing card): the
            # stage ends "failed" with the root cause, and the card waits for a human.
            if err.activity_type == names.ASSEMBLE and isinstance(err.cause, TemporalTimeout):
                return self._failed(inp, _assembly_timed_out(inp), transient=True)
            root = root_cause(err)
            # The tenant's token or cost cap refused the model call before it was made: the run
            # ends blocked with the reason, its work kept (a comment on the card runs it again).
            if isinstance(root, ApplicationError) and root.type == names.TENANT_LIMIT \
                    and versions.patched(versions.TENANT_LIMIT_BLOCKS):
                return self._done(inp, "blocked", f"{root.message}{self._kept(self._hands)}")
            return self._failed(inp, root_message(err), transient=is_transient(root_cause(err)))
        except TemporalTimeout:
            # prompt.assemble (a local activity) timed out on its last attempt. Live that arrives
            # as ActivityError(TimeoutError), handled above; on replay the SDK raises the bare
            # TimeoutError, so it must end the same way here or the history cannot replay.
            return self._failed(inp, _assembly_timed_out(inp), transient=True)
        except ApplicationError as err:
            # A local activity's ordinary failure reaches the workflow bare, live and on replay
            # (e.g. "store unavailable: database is locked" from prompt.assemble). It used to fail
            # the stage workflow; histories recorded so must still replay that way.
            if not versions.patched(versions.LOCAL_ACTIVITY_FAILURE_ENDS_STAGE):
                raise
            return self._failed(inp, root_message(err), transient=is_transient(root_cause(err)))

    async def _act(self, inp: StageInput, hands: Hands, reply: CompleteResult, iteration: int,
                   watch: StuckWatch) -> tuple[StageRun | None, str | None, str]:
        """Run the reply's tool calls, checkpoint what they changed; (a run that ends the stage,
        the promise, its reason). A finish/block tool call counts as the promise tags do."""
        p = self.progress
        promise, reason = reply.promise, reply.reason
        acts = TurnActs()
        if reply.tool_calls:
            self._details(inp, f"running {len(reply.tool_calls)} tool call(s) on {hands.where}")
            acts = await hands.run_tools(reply.tool_calls, iteration, watch)
            p.tool_calls += acts.calls
            p.tool_errors += acts.errors
            promise, reason = promise or acts.control, reason or acts.reason
        changed = False
        if acts.wrote or (promise is not None and inp.settings.verify):
            cp = await hands.checkpoint(iteration)
            if cp.rejected:
                return self._done(inp, "blocked", f"the checkpoint could not be pushed: {cp.rejected}"), None, ""
            changed = cp.committed
            if cp.committed:
                p.commits += 1
                p.last_commit = cp.sha
        watch.turn(changed or not inp.settings.verify)
        return None, promise, reason


def _assembly_timed_out(inp: StageInput) -> str:
    attempts = policies.LOCAL["retry_policy"].maximum_attempts
    return (f"prompt assembly timed out ({attempts} attempts of {inp.settings.assemble_timeout:g} s): "
            "the store is locked or slow")
