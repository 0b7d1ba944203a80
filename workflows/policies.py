"""Every timeout and retry policy of the workflows, named once."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

# Activity names are a contract with running workflows: never rename one.
ASSEMBLE = "prompt.assemble"
SUMMARIZE = "history.summarize"
COMPLETE = "llm.complete"
APPEND = "history.append"
STAGE_SETTINGS = "config.stage"
GATHER = "context.gather"

# Deterministic failures: retrying cannot help, so the activity fails at once.
NON_RETRYABLE = ["ConfigError", "CardNotFound", "InvalidInput", "ProviderRejected"]

# Prompt assembly is CPU work on data in the store: a local activity, fast, retried briefly.
ASSEMBLE_TIMEOUT = timedelta(seconds=60)
ASSEMBLE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2.0,
                             maximum_interval=timedelta(seconds=5), maximum_attempts=5,
                             non_retryable_error_types=NON_RETRYABLE)

# One model call. Providers fail transiently (429, 529, 5xx): retry with backoff for a while;
# the activity sets next_retry_delay from retry-after. Heartbeats detect a dead worker.
LLM_TIMEOUT = timedelta(minutes=10)
LLM_HEARTBEAT = timedelta(seconds=15)
LLM_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                        maximum_interval=timedelta(minutes=2), maximum_attempts=8,
                        non_retryable_error_types=NON_RETRYABLE)

# Summarization is optional (truncation is the fallback): give up sooner.
SUMMARIZE_TIMEOUT = timedelta(minutes=15)
SUMMARIZE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                              maximum_interval=timedelta(seconds=30), maximum_attempts=3,
                              non_retryable_error_types=NON_RETRYABLE)

# A context source: a few attempts, then the stage goes on without it (the activity records
# the source as unavailable on its last attempt instead of failing).
GATHER_TIMEOUT = timedelta(minutes=5)
GATHER_ATTEMPTS = 3
GATHER_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                           maximum_interval=timedelta(seconds=30), maximum_attempts=GATHER_ATTEMPTS,
                           non_retryable_error_types=NON_RETRYABLE)

STORE_TIMEOUT = timedelta(seconds=30)
STORE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10),
                          non_retryable_error_types=NON_RETRYABLE)

# Continue-as-new well before Temporal's limits (51,200 events / 50 MB); the card's start
# input may lower it (config temporal.continue_as_new_after_events).
MAX_HISTORY_EVENTS = 5_000
# Delivery ids remembered for dedup, carried across continue-as-new.
MAX_SEEN_DELIVERIES = 500
MAX_STAGE_RUNS_KEPT = 20
