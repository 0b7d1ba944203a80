"""Names that running workflows depend on: activities, workflows, signals, queries, search
attributes and the error types that must not be retried.

Every one of them is recorded in Temporal's histories, so renaming one breaks the replay of
cards already in flight: add names, never rename or remove one. The activities' decorators,
the workflows and the clients all take them from here (tests/activities/test_contract.py
checks that the worker registers exactly the activities the workflows call).
"""

from __future__ import annotations

# --- activities ------------------------------------------------------------------------------
STAGE_SETTINGS = "config.stage"
GATHER = "context.gather"
ASSEMBLE = "prompt.assemble"
SUMMARIZE = "history.summarize"
COMPLETE = "llm.complete"
APPEND = "history.append"
LOAD_STATE = "card.load_state"
SAVE_STATE = "card.save_state"
# The coding agent's workspace. WORKSPACE_OPEN runs on the shared task queue and answers with the
# task queue of the worker that now holds the card's worktree; the other three run there
# (Temporal's worker-affinity pattern: the worktree is on that worker's disk).
WORKSPACE_OPEN = "workspace.open"
TOOL = "workspace.tool"
CHECKPOINT = "workspace.checkpoint"
VERIFY = "workspace.verify"
WORKSPACE_ACTIVITIES = (TOOL, CHECKPOINT, VERIFY)
# The card's work back where people look: a pull request for the card's branch.
PULL_REQUEST = "results.pull_request"
COMMENT = "results.comment"
REVIEW = "results.review"  # the review stage's line comments as one pull request review
CI_STATUS = "results.ci_status"  # GitHub Actions' verdict on a pushed commit (error_fixing waits for it)

# The card's progress back on its board (cardloop/integrations/board_clients/): a marked comment,
# a column move or the blocked column/label.
BOARD_COMMENT = "board.comment"
BOARD_MOVE = "board.move"

# Research over large artifacts (workflows/research.py): buffers and chunks, the planner's
# queries and chunk selection, one analyst batch, the synthesizer (with its tools).
RESEARCH_BUFFERS = "research.buffers"
RESEARCH_PLAN = "research.plan"
RESEARCH_ANALYZE = "research.analyze"
RESEARCH_SYNTHESIZE = "research.synthesize"
# The agent's research tool: the stage workflow answers it with a ResearchWorkflow child.
RESEARCH_TOOL = "research"
# What the calls kept under a key cost (a research or summarize that failed: the run counts it).
LEDGER_KEPT = "ledger.kept"
RESEARCH_ACTIVITIES = (RESEARCH_BUFFERS, RESEARCH_PLAN, RESEARCH_ANALYZE, RESEARCH_SYNTHESIZE)

ACTIVITIES = (STAGE_SETTINGS, GATHER, ASSEMBLE, SUMMARIZE, COMPLETE, APPEND, LOAD_STATE, SAVE_STATE, WORKSPACE_OPEN,
              *WORKSPACE_ACTIVITIES, PULL_REQUEST, COMMENT, CI_STATUS, REVIEW, BOARD_COMMENT, BOARD_MOVE,
              *RESEARCH_ACTIVITIES, LEDGER_KEPT)

# --- workflows, signals, queries -------------------------------------------------------------
CARD_WORKFLOW = "CardWorkflow"
STAGE_WORKFLOW = "StageWorkflow"
RESEARCH_WORKFLOW = "ResearchWorkflow"

SIGNAL_TRANSITION = "transition"
SIGNAL_COMMENT = "comment"
SIGNAL_STAGE_PROGRESS = "stage_progress"
SIGNAL_RETITLE = "retitle"  # the card was renamed on its board: the memo follows
UPDATE_RETRY = "retry"  # run the card's failed stage again; refused unless the last run failed
UPDATE_CANCEL = "cancel_stage"  # stop the running stage, its work kept; refused unless one runs
QUERY_STATE = "state"
# How a card workflow's update validator ends a refusal that passes by itself (the run is starting,
# or between two steps): CardService asks again for a few seconds before it says so.
TRY_AGAIN = "try again in a moment"
QUERY_PROGRESS = "progress"

# --- search attributes (registered on the namespace; the operator's queries use them) --------
SA_CARD_ID = "CardId"
SA_CARD_STAGE = "CardStage"
SA_REPO = "Repo"
SA_TENANT = "Tenant"
# What operators filter on: a card's status (new, running, blocked, failed, idle, done) and the
# outcome of a stage run (on the card: of its last run). Stage runs carry CardId, CardStage,
# Repo and Tenant too, so `CardId = '...'` lists a card with its stage runs.
SA_CARD_STATUS = "CardStatus"
SA_STAGE_OUTCOME = "StageOutcome"
SEARCH_ATTRIBUTE_TYPES = {SA_CARD_ID: "Keyword", SA_CARD_STAGE: "Keyword", SA_REPO: "Keyword", SA_TENANT: "Keyword",
                          SA_CARD_STATUS: "Keyword", SA_STAGE_OUTCOME: "Keyword"}

# --- boards ------------------------------------------------------------------------------------
# The boards cardloop has an adapter for (cardloop/app/boards/adapters.py BOARDS, which a test
# holds to this list): the config check names an unknown one without importing the adapters and
# their clients (about 50 ms of every CLI command that reads the config).
BOARD_NAMES = ("github", "linear", "jira", "trello", "generic")
# The same for the context sources and the model providers (cardloop/integrations/sources/
# registry.py SOURCES and providers/registry.py PROVIDERS, each held to its list by a test): the
# registries import the sources' and providers' base modules (about 10 ms of every command).
SOURCE_NAMES = ("repository", "github_actions", "github_reviews", "github_tests", "kubernetes")
PROVIDER_NAMES = ("anthropic", "openai", "gemini")

# --- error types -----------------------------------------------------------------------------
# Deterministic failures: retrying cannot help, so the activity fails at once and the
# workflow decides (a stage ends "failed" with the message).
CONFIG_ERROR = "ConfigError"
CARD_NOT_FOUND = "CardNotFound"
INVALID_INPUT = "InvalidInput"
PROVIDER_REJECTED = "ProviderRejected"
# An analyst batch the provider refused (AnalyzeResult.reason starts with it): skipped, unless
# every batch was (then the research fails with the first refusal).
RESEARCH_BATCH_REFUSED = "refused by the provider"
# The workspace cannot be made for this card (no repository, a branch git refuses, a clone the
# remote refuses): a person must act.
WORKSPACE_REFUSED = "WorkspaceRefused"
NON_RETRYABLE = (CONFIG_ERROR, CARD_NOT_FOUND, INVALID_INPUT, PROVIDER_REJECTED, WORKSPACE_REFUSED)
# The tenant's token or cost cap ([limits], cardloop/contracts/limits.py) refused a model call
# before it was made (non-retryable): the stage ends "blocked" with the reason, its work kept.
TENANT_LIMIT = "TenantLimit"
# A StageWorkflow whose run failed fails itself with this type, so the Temporal UI lists the run
# as Failed; the error's first detail is the run's StageRun, which the card workflow records.
STAGE_FAILED = "StageFailed"

# Failures whose cause passes: the model stayed overloaded or unreachable past its retry
# schedule ([retry] in config.toml). The stage fails, the run is marked transient, and the card
# may run it again by itself ([retry] auto_retry_after) or on `cardloop card retry`.
MODEL_UNAVAILABLE = "ModelUnavailable"
# An activity gave up after [retry] other_attempts on a failure that is not the provider's.
GAVE_UP = "GaveUp"
# Transient: the store could not answer ("store unavailable: database is locked"); retried.
STORE_UNAVAILABLE = "StoreUnavailable"
TRANSIENT_FAILURES = (MODEL_UNAVAILABLE, STORE_UNAVAILABLE)
