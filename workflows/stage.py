"""StageWorkflow: the agent loop of one stage run ("Ralph loop").

Each turn: assemble the prompt (local activity), summarize the history first when it must
be folded and no summary is cached, call the model (activity; it records the reply in the
chat history and the usage), then act on the reply. The loop ends when the reply carries
<promise>COMPLETE</promise> or <promise>BLOCKED</promise>, or when the iteration or token
budget of the stage is spent.
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
        AppendInput,
        AssembleInput,
        AssembleResult,
        CIInput,
        CIResult,
        CommentInput,
        CommentOutcome,
        CompleteInput,
        CompleteResult,
        GatherInput,
        GatherResult,
        KeptUsage,
        NamedBlob,
        PullRequestInput,
        PullRequestOutcome,
        ResearchResult,
        ReviewInput,
        ReviewPosted,
        StageInput,
        StageProgress,
        StageRun,
        SummarizeInput,
        SummarizeResult,
        tokens_spent,
    )
    from cardloop.workflows import policies, versions
    from cardloop.workflows.failures import is_transient
    from cardloop.workflows.kept import kept_under
    from cardloop.workflows.research import research_large_logs, research_tool
    from cardloop.workflows.workspace import Hands, StuckWatch, TurnActs


STAGE_OUTCOME = SearchAttributeKey.for_keyword(names.SA_STAGE_OUTCOME)

# The first words of the note that refuses a claim because of CI.
NOT_ACCEPTED_CI = "COMPLETE was not accepted: CI of"

# Outcomes a person wants to read about on the card's issue or pull request.
COMMENTED = ("completed", "blocked", "budget_exhausted")


@workflow.defn(name=names.STAGE_WORKFLOW)
class StageWorkflow:
    def __init__(self) -> None:
        self.progress = StageProgress()
        self._verification = ""  # the last verification's note: the pull request's evidence
        self._hands: Hands | None = None
        self._logs: list[NamedBlob] = []  # the whole logs this run's context sources kept (research reads them)

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
            root = _root_cause(err)
            # The tenant's token or cost cap refused the model call before it was made: the run
            # ends blocked with the reason, its work kept (a comment on the card runs it again).
            if isinstance(root, ApplicationError) and root.type == names.TENANT_LIMIT \
                    and versions.patched(versions.TENANT_LIMIT_BLOCKS):
                return self._done(inp, "blocked", f"{root.message}{self._kept(self._hands)}")
            return self._failed(inp, _root_message(err), transient=is_transient(_root_cause(err)))
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
            return self._failed(inp, _root_message(err), transient=is_transient(_root_cause(err)))

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

    async def _verify(self, inp: StageInput, hands: Hands, iteration: int) -> StageRun | None:
        """Evidence for COMPLETE: the repository's tests pass. A refused claim goes back to the
        model with the failing output (in the history); refused `stuck_repeats` times, blocked."""
        p = self.progress
        self._details(inp, f"verifying COMPLETE: {hands.info.test_command or 'tests'}")
        result = await hands.verify(iteration)
        p.verified = result.passed
        self._verification = result.excerpt
        if result.no_command:
            return self._done(inp, "blocked", result.excerpt)
        if not result.passed:
            p.refused_claims += 1
            if p.refused_claims >= inp.settings.stuck_repeats:
                return self._done(inp, "blocked", f"COMPLETE was refused {p.refused_claims} times: the tests "
                                                  f"still fail. {result.excerpt}")
        return None

    async def _wait_for_ci(self, inp: StageInput, hands: Hands, iteration: int) -> StageRun | None:
        """The pushed commit's GitHub Actions runs as further evidence: success keeps the claim;
        a failure refuses it (the failed jobs' logs join the history for the next turn); no run
        within the grace period means no CI for it; still running at the deadline: blocked."""
        s, p = inp.settings, self.progress
        sha = p.last_commit or hands.info.head
        start = workflow.now()
        while True:
            self._details(inp, f"waiting for CI of {sha[:12]}")
            result = await workflow.execute_activity(
                names.CI_STATUS, CIInput(card_key=inp.ref.key, sha=sha), result_type=CIResult,
                **policies.RESULTS, summary=f"{inp.stage} turn {iteration}: CI of {sha[:12]}")
            waited = (workflow.now() - start).total_seconds()
            if result.state == "success" or result.state == "skipped" or \
                    (result.state == "none" and waited >= s.ci_none_grace_seconds):
                p.ci = result.skipped or result.summary or result.state
                return None
            if result.state == "failure":
                p.verified, p.ci = False, result.summary
                p.refused_claims += 1
                await workflow.execute_activity(
                    names.APPEND,
                    AppendInput(card_key=inp.ref.key, role="user", author="cardloop", stage=inp.stage,
                                dedup_key=f"{workflow.info().workflow_id}/ci-{iteration}",
                                text=(f"{NOT_ACCEPTED_CI} {sha[:12]} failed ({result.summary}). Fix it, then "
                                      f"finish again.\n\n{result.failing}")[:32_000]),
                    result_type=int, **policies.STORE, summary=f"{inp.stage}: CI failed")
                if p.refused_claims >= s.stuck_repeats:
                    return self._done(inp, "blocked", f"COMPLETE was refused {p.refused_claims} times: CI "
                                                      f"still fails ({result.summary[:300]})")
                return None
            if waited >= s.ci_wait_seconds:
                return self._done(inp, "blocked", f"CI of {sha[:12]} did not finish within "
                                                  f"{s.ci_wait_seconds:g} s ({result.summary or result.state})")
            await workflow.sleep(s.ci_poll_seconds)

    async def _post_review(self, inp: StageInput, hands: Hands, done: StageRun) -> StageRun:
        """The stage's line comments as one review on the branch's pull request; the run keeps
        its outcome whatever GitHub says, and its reason says what happened."""
        try:
            posted = await workflow.execute_activity(
                names.REVIEW,
                ReviewInput(card_key=inp.ref.key, key=f"{inp.ref.key}/{inp.run}/{inp.stage}/review",
                            branch=hands.info.branch, comments=hands.review_comments,
                            body=f"cardloop {inp.stage} (run {inp.run}): {done.reason[:2_000]}"),
                result_type=ReviewPosted, **policies.RESULTS,
                summary=f"{inp.stage}: {len(hands.review_comments)} line comment(s) as a review")
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            return done.model_copy(update={"reason": f"{done.reason} (the review could not be posted: "
                                                      f"{_root_message(err)[:300]})"})
        if posted.skipped:
            return done.model_copy(update={"reason": f"{done.reason} (review not posted: {posted.skipped})"})
        return done.model_copy(update={"review": posted.url})

    async def _comment(self, inp: StageInput, done: StageRun) -> StageRun:
        """The run's outcome on the card's GitHub issue or pull request; never changes the outcome."""
        branch = self._hands.info.branch if self._hands is not None else ""
        try:
            said = await workflow.execute_activity(
                names.COMMENT,
                CommentInput(card_key=inp.ref.key, key=f"{inp.ref.key}/{inp.run}/{inp.stage}", stage=inp.stage,
                             run=inp.run, outcome=done.outcome, reason=done.reason[:8_000], branch=branch,
                             pull_request=done.pull_request),
                result_type=CommentOutcome, **policies.RESULTS, summary=f"{inp.stage}: comment the outcome")
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            workflow.logger.warning("the outcome comment failed: %s", _root_message(err))
            return done
        return done.model_copy(update={"comment": said.target}) if said.target else done

    async def _pull_request(self, inp: StageInput, hands: Hands, done: StageRun) -> StageRun:
        """The completed stage's branch as a pull request; the stage stays completed when GitHub
        is not configured or refuses (the work is pushed either way), and the run says so."""
        self._details(inp, f"opening or updating the pull request for {hands.info.branch}")
        try:
            pr = await workflow.execute_activity(
                names.PULL_REQUEST,
                PullRequestInput(card_key=inp.ref.key, key=f"{workflow.info().workflow_id}/pull-request",
                                 branch=hands.info.branch, summary=done.reason[:8_000],
                                 verification=self._verification[:4_000]),
                result_type=PullRequestOutcome, **policies.RESULTS,
                summary=f"{inp.stage}: pull request for {hands.info.branch}")
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            return done.model_copy(update={"reason": f"{done.reason} (the pull request could not be opened: "
                                                      f"{_root_message(err)[:300]})"})
        if pr.skipped:
            return done.model_copy(update={"reason": f"{done.reason} (no pull request: {pr.skipped})"})
        workflow.set_current_details(f"**{inp.stage}** run {inp.run}: completed; pull request {pr.url}")
        return done.model_copy(update={"pull_request": pr.url})

    async def _cancelled(self, inp: StageInput) -> StageRun:
        """The run was cancelled (a move, `card cancel`). A command it ran has been stopped (the
        tool call waits for that); what the turn's tools wrote since the last checkpoint is
        committed and pushed now, so the branch holds all of the run's work."""
        reason = "the card moved to another stage"
        hands = self._hands
        if hands is not None and hands.unsaved and versions.patched(versions.CHECKPOINT_ON_CANCEL):
            p = self.progress
            try:
                cp = await hands.checkpoint(p.iteration)
            except (ActivityError, asyncio.CancelledError) as err:
                reason += f"; the last turn's changes were not committed: {_root_message(err)[:300]}"
            else:
                if cp.rejected:
                    reason += f"; the last turn's changes could not be pushed: {cp.rejected[:300]}"
                elif cp.committed:
                    p.commits += 1
                    p.last_commit = cp.sha
        return self._done(inp, "cancelled", reason)

    def _kept(self, hands: Hands | None) -> str:
        p = self.progress
        if hands is None or not p.last_commit:
            return ""
        return f"; the work is kept on {hands.info.branch} at {p.last_commit[:12]}"

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


def _root_cause(err: BaseException) -> BaseException:
    cause = err
    while cause.__cause__ is not None or getattr(cause, "cause", None) is not None:
        cause = getattr(cause, "cause", None) or cause.__cause__  # type: ignore[assignment]
    return cause


def _root_message(err: BaseException) -> str:
    """The innermost cause's message: what a person can act on ("store unavailable: database
    is locked", the provider's 400), not "Activity task failed"."""
    cause = _root_cause(err)
    return str(getattr(cause, "message", None) or cause)[:1000]


def _assembly_timed_out(inp: StageInput) -> str:
    attempts = policies.LOCAL["retry_policy"].maximum_attempts
    return (f"prompt assembly timed out ({attempts} attempts of {inp.settings.assemble_timeout:g} s): "
            "the store is locked or slow")
