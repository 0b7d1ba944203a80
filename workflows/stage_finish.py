"""How a stage run's claim of COMPLETE is checked and its outcome delivered: the repository's
tests and CI as evidence, the review's line comments, the outcome comment and the pull request;
and what a cancelled run keeps."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import (
        AppendInput,
        CIInput,
        CIResult,
        CommentInput,
        CommentOutcome,
        PullRequestInput,
        PullRequestOutcome,
        ReviewInput,
        ReviewPosted,
        StageInput,
        StageRun,
    )
    from cardloop.workflows import policies, versions
    from cardloop.workflows.failures import root_message
    from cardloop.workflows.stage_record import StageRecord
    from cardloop.workflows.workspace import Hands

# The first words of the note that refuses a claim because of CI.
NOT_ACCEPTED_CI = "COMPLETE was not accepted: CI of"


class StageFinish(StageRecord):
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
                                                      f"{root_message(err)[:300]})"})
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
            workflow.logger.warning("the outcome comment failed: %s", root_message(err))
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
                                                      f"{root_message(err)[:300]})"})
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
                reason += f"; the last turn's changes were not committed: {root_message(err)[:300]}"
            else:
                if cp.rejected:
                    reason += f"; the last turn's changes could not be pushed: {cp.rejected[:300]}"
                elif cp.committed:
                    p.commits += 1
                    p.last_commit = cp.sha
        return self._done(inp, "cancelled", reason)
