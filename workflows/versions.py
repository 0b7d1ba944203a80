"""Which behaviour a workflow run follows, decided once, in the run's first workflow task.

Every change to what a workflow does keeps runs recorded before it replaying: the new
behaviour sits behind a patch id. Temporal's `workflow.patched(id)` records a marker where it
is first called and, on replay, answers True only when that marker is in the workflow task
being replayed. That breaks when a run is queried (`card show`, `--follow`, the API) at the
moment a local activity finishes: to answer the query, Temporal's core closes the workflow task
with the activity's marker and hands the result to the code in a new task, so the code after
the activity runs in the next task. On replay the result is in the first task, the code after
the activity runs there, a first `patched()` call in it does not yet see its marker and
answers False, and the history no longer replays: a NondeterminismError, and the card stuck
on every worker that has to replay it (measured: one such run in 18 under queries every 10 ms;
it is sdk-core's, `managed_run.rs`, "force a new task" when a query meets a pending local
activity resolution).

So runs started by this code decide every patch at their start: `decide_at_start()` is the
first thing a workflow's run method does, before anything can be awaited. It records one
marker, GENERATION, and every patch in CURRENT is then on for the run without a marker of its
own (fewer events, too). Runs recorded before GENERATION existed have no such marker, replay
with it off, and ask `workflow.patched` at each site as they always did.

A later change adds a generation of its own (a new gate id and the patch ids it introduces) to
GENERATIONS instead of a bare `workflow.patched` call; tests/workflows/test_determinism_guard.py
refuses `workflow.patched` anywhere else. `patched` lets a running run of an older generation take
up a newer patch (Temporal's own marker, where it is first asked); `decided` does not: the run
keeps its behaviour to its end, which is what a patch asked next to a local activity needs.
"""

from __future__ import annotations

from temporalio import workflow

# --- the card workflow ---
# Runs recorded before the state was kept in the store replay without loading or saving it.
STATE_IN_STORE = "card-state-in-store"
# Runs that save their closing state as a local activity (recorded before: a scheduled one).
STATE_SAVED_LOCALLY = "card-state-saved-locally"
# Runs recorded before automatic retries of transiently failed stages wait without a timer.
AUTO_RETRY = "auto-retry"
# Runs recorded before CardStatus/StageOutcome existed replay without their upserts, and start
# their stage runs without search attributes (and stage runs that failed returned normally).
STATUS_ATTRIBUTES = "status-search-attributes"
# Runs recorded before a move to the running stage left it running replay cancelling it.
SAME_STAGE_KEEPS_RUNNING = "same-stage-keeps-running"
# Runs recorded before board writes replay without them.
BOARD_WRITES = "board-writes"
# Runs recorded before the started comment went alongside the stage's start (not before it), and
# before the stage left its GitHub outcome comment to the board (the board's edits it: one marker).
BOARD_ALONGSIDE = "board-writes-alongside"
# A run whose started comment was a dry run (the worker cannot write to the board: nothing is
# sent, the writes only say what they would do) writes its end as local activities: no network
# call to wait for, and each remote one cost the card an activity task and a workflow task
# (per-card overhead, issue 10). Runs recorded before replay their end writes as activities.
BOARD_DRY_RUN_LOCAL = "board-dry-run-ends-locally"

# --- the stage workflow ---
# Histories recorded before context sources existed replay without gathering them.
CONTEXT_SOURCES = "context-sources"
# ... and those from before research replay without researching logs too large for the prompt.
RESEARCH_LARGE_LOGS = "research-large-logs"
# ... and without the agent's research tool.
RESEARCH_TOOL = "research-tool"
# Runs recorded before review line comments replay without posting them.
REVIEW_LINE_COMMENTS = "review-line-comments"
# Agent histories recorded before outcome comments replay without this step.
OUTCOME_COMMENT = "outcome-comment"
# Runs recorded before the outcome was a search attribute (and a failed run failed the
# workflow) replay without the upsert and return their failed run normally.
OUTCOME_ATTRIBUTE = "outcome-search-attribute"
CANCEL_DURING_REPORT = "cancel-during-progress-report"
# A turn that ends the run sends no progress signal: the run's result carries the same figures,
# and the signal cost the stage and the card a workflow task each (per-card overhead, issue 10).
QUIET_LAST_TURN = "no-progress-signal-on-the-last-turn"
# Runs recorded before a tenant's cap blocked the stage replay failing it.
TENANT_LIMIT_BLOCKS = "tenant-limit-blocks"
# A local activity's ordinary failure used to fail the stage workflow; histories recorded so
# must still replay that way.
LOCAL_ACTIVITY_FAILURE_ENDS_STAGE = "local-activity-failure-ends-stage"
# A cancelled stage (a move, `card cancel`) waits until its running tool call or verification
# has stopped (the worker kills the command), then commits and pushes what that turn's tools
# wrote. Runs recorded before abandoned the call and left the turn to the next run's checkpoint.
CHECKPOINT_ON_CANCEL = "checkpoint-on-cancel"
# Board writes go through a lane of their own, in order, beside the card's loop: a board that
# is down (its writes retrying for minutes) no longer holds the card's moves, comments and
# `card cancel`. Runs recorded before awaited the started comment after starting the stage and
# the end writes before taking the next move.
BOARD_LANE = "board-lane"
# Research the run made (over large logs, the agent's research tool) is billed under the stage:
# its cost joins the run's, and so its cost budget. Runs recorded before left it out, and a
# budget they did not reach then must not end them on replay.
RESEARCH_IN_RUN_COST = "research-in-run-cost"
# ... and so is research that failed or was cancelled after its model calls (read back from the
# ledger by the research workflow's id); a stage cancelled while its research ran ends cancelled
# (it used to go on with the next step). Runs recorded before replay without that read.
RESEARCH_FAILED_IN_RUN_COST = "research-failed-in-run-cost"
# A summarize's model calls are keyed by the run and turn (SummarizeInput.key), and one that
# fails for good (or is cancelled) after some of its calls has them read back from the ledger
# into the run's cost; a stage cancelled while it summarized ends cancelled (it went on, on a
# truncated turn). Runs recorded before replay without that read.
SUMMARY_FAILED_IN_RUN_COST = "summary-failed-in-run-cost"
# A stage's token_budget counts every token the run spent on the model (the summarizer's, its
# research's, the cached prompt's: what its cost and closing line count). Runs recorded before
# counted the turns' uncached input and output only, and a budget they did not reach then must
# not end them on replay.
TOKEN_BUDGET_COUNTS_ALL = "token-budget-counts-all-tokens"
# A card's loop, its board lane and its signal handlers schedule nothing while another of them
# is inside a local activity, and local activities run one at a time (workflows/local_gate.py:
# a query meeting a local activity's end made the lane's board write and the loop's upsert
# swap places between the live run and its replay). Asked with `decided`: runs of earlier
# generations, recorded or still running, go on without waiting.
LOCAL_ACTIVITIES_ALONE = "local-activities-run-alone"
# The closing state is saved by a scheduled activity again: after a local one, the run decided
# to close reading moves and comments that, under the same race, a replay had not seen yet.
# Runs recorded with STATE_SAVED_LOCALLY (and without this) replay saving it locally; asked with
# `decided` too.
STATE_SAVED_BY_ACTIVITY = "card-state-saved-by-activity"

# A `card cancel` (or a card archived on its board) that reached a stage run as it ended on its own
# (completed, failed, blocked) holds the card: no auto-advance and no automatic retry follow, the
# card waits for its next move as a cancelled one does. Runs recorded before advanced.
STOP_HOLDS_THE_CARD = "card-stop-holds-the-card"
# A card's run reopened by a move or a comment after its last run closed shows the stage it stands
# on (CardStage), not the "new" its start was given. Runs recorded before published the status only.
REOPENED_SHOWS_ITS_STAGE = "reopened-card-shows-its-stage"

# Each generation, oldest first: its gate (recorded at a run's start) and the patches it adds; a
# run with a generation's gate has that generation's patches and every older one's. A run
# records one gate, its newest. BOARD_WRITES is in none: runs with BOARD_ALONGSIDE never ask for it.
GENERATIONS: tuple[tuple[str, frozenset[str]], ...] = (
    ("patches-decided-at-start", frozenset({
        STATE_IN_STORE, STATE_SAVED_LOCALLY, AUTO_RETRY, STATUS_ATTRIBUTES, SAME_STAGE_KEEPS_RUNNING,
        BOARD_ALONGSIDE, BOARD_DRY_RUN_LOCAL,
        CONTEXT_SOURCES, RESEARCH_LARGE_LOGS, RESEARCH_TOOL, REVIEW_LINE_COMMENTS, OUTCOME_COMMENT,
        OUTCOME_ATTRIBUTE, CANCEL_DURING_REPORT, QUIET_LAST_TURN, TENANT_LIMIT_BLOCKS,
        LOCAL_ACTIVITY_FAILURE_ENDS_STAGE,
    })),
    ("patches-decided-at-start-2", frozenset({CHECKPOINT_ON_CANCEL, BOARD_LANE})),
    ("patches-decided-at-start-3", frozenset({RESEARCH_IN_RUN_COST})),
    # 4 never left the branch that made it before its summary patch joined it: one gate for both.
    ("patches-decided-at-start-4", frozenset({RESEARCH_FAILED_IN_RUN_COST, SUMMARY_FAILED_IN_RUN_COST})),
    ("patches-decided-at-start-5", frozenset({TOKEN_BUDGET_COUNTS_ALL})),
    ("patches-decided-at-start-6", frozenset({LOCAL_ACTIVITIES_ALONE, STATE_SAVED_BY_ACTIVITY})),
    ("patches-decided-at-start-7", frozenset({STOP_HOLDS_THE_CARD, REOPENED_SHOWS_ITS_STAGE})),
)
# Patches only runs recorded before their successor ask for.
SUPERSEDED = frozenset({BOARD_WRITES})

# Where a run keeps what it decided: on its own workflow instance (a module-level value would be
# shared by every run in the worker).
_DECIDED = "_cardloop_patches_on"


def decide_at_start() -> None:
    """Call first in a workflow's run method: the run's generation, decided in its first task.
    Newest first: a new run records the newest gate only; a run recorded under an older one
    finds no marker for the newer gates (False on replay, nothing recorded) and its own."""
    on: frozenset[str] = frozenset()
    for newest in range(len(GENERATIONS) - 1, -1, -1):
        if workflow.patched(GENERATIONS[newest][0]):
            on = frozenset().union(*(patches for _, patches in GENERATIONS[:newest + 1]))
            break
    setattr(workflow.instance(), _DECIDED, on)


def decided(patch_id: str) -> bool:
    """True when this run decided `patch_id` at its start (it records the generation that has it).
    A run of an older generation gets False without a marker: its behaviour never changes mid-run,
    and no first `workflow.patched` call can land right after a local activity (see above)."""
    return patch_id in getattr(workflow.instance(), _DECIDED, frozenset())


def patched(patch_id: str) -> bool:
    """True when this run follows the behaviour behind `patch_id`: decided at its start for runs
    of a generation that has it, else Temporal's own answer (runs recorded before)."""
    if patch_id in getattr(workflow.instance(), _DECIDED, frozenset()):
        return True
    return workflow.patched(patch_id)
