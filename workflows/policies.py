"""Every timeout and retry policy of the workflows, named once.

Each activity's options are one bundle, passed as `**policies.LLM`, so a call site names the
activity and its input and nothing else that could drift from the other call sites.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig, LocalActivityConfig

from cardloop.contracts.names import NON_RETRYABLE


def _retry(initial: timedelta, maximum: timedelta, attempts: int = 0) -> RetryPolicy:
    return RetryPolicy(initial_interval=initial, backoff_coefficient=2.0, maximum_interval=maximum,
                       maximum_attempts=attempts, non_retryable_error_types=list(NON_RETRYABLE))


# Heartbeats are how Temporal learns that a worker died during a long call.
HEARTBEAT = timedelta(seconds=15)

# Prompt assembly and stage settings are CPU work on data in the store: local activities,
# fast, retried briefly.
LOCAL: LocalActivityConfig = LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=_retry(timedelta(milliseconds=200), timedelta(seconds=5), attempts=5))


def assembly(timeout_seconds: float) -> LocalActivityConfig:
    """LOCAL with the stage's own timeout per attempt (StageSettings.assemble_timeout)."""
    return LocalActivityConfig(start_to_close_timeout=timedelta(seconds=timeout_seconds),
                               retry_policy=LOCAL["retry_policy"])


# One model call. Providers fail transiently (429, 529, 5xx, unreachable) for seconds or for
# minutes: the activity decides each next_retry_delay and when to give up from [retry] in the
# worker's config.toml (cardloop/contracts/retry.py, activities/retrying.py), so the policy
# itself sets no maximum of attempts. Changing it changes no command: histories replay.
LLM: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=10), heartbeat_timeout=HEARTBEAT,
    retry_policy=_retry(timedelta(seconds=1), timedelta(minutes=2)))

# Summarization is optional (truncation is the fallback): give up sooner.
SUMMARIZE: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=15), heartbeat_timeout=HEARTBEAT,
    retry_policy=_retry(timedelta(seconds=1), timedelta(seconds=30), attempts=3))

# A context source: a few attempts, then the stage goes on without it (the activity records
# the source as unavailable on its last attempt instead of failing).
GATHER_ATTEMPTS = 3
GATHER: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=5), heartbeat_timeout=HEARTBEAT,
    retry_policy=_retry(timedelta(seconds=2), timedelta(seconds=30), attempts=GATHER_ATTEMPTS))

# A write to the store: retried until it lands (the store is ours; it comes back).
STORE: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=_retry(timedelta(milliseconds=200), timedelta(seconds=10)))

# The same write run as a local activity, in the workflow task that asked for it (one task
# fewer than a scheduled activity's round trip through the server): retried as long, because a
# card's state must land; past the SDK's local retry threshold its backoff becomes a timer.
STORE_LOCAL: LocalActivityConfig = LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=30), retry_policy=STORE["retry_policy"])

# Opening the card's workspace (a clone or fetch on some worker): retried a few times.
WORKSPACE_OPEN: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=10), heartbeat_timeout=timedelta(seconds=30),
    retry_policy=_retry(timedelta(seconds=2), timedelta(seconds=30), attempts=4))


def on_workspace(queue: str, affinity_timeout: float, *, minutes: float = 30) -> ActivityConfig:
    """A tool call, checkpoint or verification on the worker that holds the worktree. When that
    worker is gone nobody polls `queue`: the schedule-to-start timeout ends the wait and the stage
    opens the workspace again elsewhere. Heartbeats notice a worker that died mid-call, and bring
    a cancellation to the call: the SDK sends them at most every 0.8 x the timeout, so 10 s
    stops a cancelled stage's command within about 8 s (the activity heartbeats every 3 s)."""
    return ActivityConfig(task_queue=queue, schedule_to_start_timeout=timedelta(seconds=affinity_timeout),
                          start_to_close_timeout=timedelta(minutes=minutes), heartbeat_timeout=timedelta(seconds=10),
                          retry_policy=_retry(timedelta(seconds=1), timedelta(seconds=10), attempts=3))


# Results on GitHub (a pull request, a comment, a review): a rate limit waits as long as GitHub
# asks (next_retry_delay: Retry-After, a secondary limit's minute or more, the hourly reset),
# outages back off to 5 minutes; 8 attempts, then the stage goes on (its work is pushed either way).
RESULTS: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=3), heartbeat_timeout=timedelta(seconds=30),
    retry_policy=_retry(timedelta(seconds=2), timedelta(minutes=5), attempts=8))

# A write to the card's board (a comment, a column move): rate limits wait as long as the board
# asks (next_retry_delay), outages back off to 5 minutes; after that the stage goes on without it.
BOARD: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=2), heartbeat_timeout=timedelta(seconds=30),
    retry_policy=_retry(timedelta(seconds=2), timedelta(minutes=5), attempts=8))

# Research: storing and chunking artifacts is CPU work on the store's blobs (a 40 MB log takes
# seconds); retried like a store write, with heartbeats for a worker that dies meanwhile.
RESEARCH_PREPARE: ActivityConfig = ActivityConfig(
    start_to_close_timeout=timedelta(minutes=10), heartbeat_timeout=HEARTBEAT,
    retry_policy=_retry(timedelta(seconds=1), timedelta(seconds=30), attempts=5))

# Delivery ids remembered for dedup, carried across continue-as-new.
MAX_SEEN_DELIVERIES = 500
MAX_STAGE_RUNS_KEPT = 20
