"""Values that cross the Temporal boundary: workflow and activity inputs and outputs.

They are a contract with workflows already running: add fields only with defaults, never
rename or remove one. Every value here is small (ids, counts, short excerpts); the large
things (history, prompts, logs) live in the store and travel as references.
"""

# No `from __future__ import annotations` here: pydantic would evaluate each of the ~400 field
# annotations from its string at class creation (about 10 ms of every card command's start-up).
# A field naming a model defined further down quotes that annotation.
import hashlib
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cardloop.contracts.comments import MAX_COMMENT_CHARS
from cardloop.prompts.stages import STAGE_NAMES

# Where a card can be moved: a stage, or done. Derived from the Stage enum, written once.
TARGET_NAMES: tuple[str, ...] = (*STAGE_NAMES, "done")
Target = Literal[TARGET_NAMES]  # type: ignore[valid-type]
# A card workflow continues as new past this many history events (Temporal's limit is 51,200).
DEFAULT_MAX_HISTORY_EVENTS = 5_000
Outcome = Literal["completed", "blocked", "budget_exhausted", "cancelled", "failed"]
Promise = Literal["COMPLETE", "BLOCKED"]

_KEY_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:#-]{0,199}")
# A board's card id as cardloop keeps it (the same rule as a card file's `id`): GitHub's
# "owner/repo#12", Linear's "ENG-12", Jira's "PAY-142", Trello's short links and ids.
_BOARD_CARD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:#/-]{0,199}")
# The card id part of a key: "/" is written ":" (the key's own separator is "/"), so a literal
# ":" is written "%3A". Nothing else is escaped, so the keys of ids without ":" never changed.
_KEY_CARD_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._#:-]|%3A){0,199}")
MAX_CARD_ID = 200
# Who moved or commented, as a move or a comment carries it.
MAX_ACTOR = 200
MAX_DELIVERY_ID = 300


def card_key_id(board_card_id: str) -> str:
    """The card id part of a card key for a board's card id; ValueError naming the id when it
    cannot be kept as it is.

    One board id, one key, and never one key for two ids: "acme/api#12" -> "acme:api#12" (as
    before), "a:b:c" -> "a%3Ab%3Ac". An id with characters outside letters, digits and . _ : # / -
    (spaces, bidi controls, zero-width characters), or one that starts with a punctuation mark
    ("////", "..."), is refused rather than cleaned up: cleaning merged distinct cards."""
    if not isinstance(board_card_id, str) or not _BOARD_CARD_ID.fullmatch(board_card_id):
        raise ValueError(f"card id {ascii(board_card_id)[:220]} cannot be kept as it is: use letters, digits and "
                         f". _ : # / - (at most {MAX_CARD_ID}), starting with a letter or digit")
    encoded = board_card_id.replace(":", "%3A").replace("/", ":")
    if len(encoded) > MAX_CARD_ID:
        raise ValueError(f"card id {board_card_id!r} is longer than {MAX_CARD_ID} characters once its "
                         "':' are escaped as %3A")
    return encoded


# Validators and serializers are built on a model's first use, not at import: the CLI imports
# this module for a few of its 60 models, and building them all took about 20 ms of every card
# command's start-up. The worker and the API build them all as they start (build_models).
_DEFERRED = ConfigDict(defer_build=True)


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class CardRef(_Value):
    """Which card: tenant, board and the board's card id. Never a secret, never prompt text."""

    tenant: str = "default"
    board: str = "generic"
    card_id: str

    @field_validator("tenant", "board")
    @classmethod
    def _safe(cls, value: str) -> str:
        if not _KEY_PART.fullmatch(value):
            raise ValueError(f"{ascii(value)[:220]}: use letters, digits and . _ : # - (at most 200)")
        return value

    @field_validator("card_id")
    @classmethod
    def _encoded(cls, value: str) -> str:
        # Only the canonical encoding (card_key_id's output) is a key: one card, one key.
        if len(value) > MAX_CARD_ID or not _KEY_CARD_ID.fullmatch(value):
            raise ValueError(f"card id {ascii(value)[:220]}: use letters, digits and . _ : # - and %3A for a "
                             "literal ':' (at most 200); a board's own id with '/' in it is written with ':' "
                             "(owner/repo#12 is owner:repo#12)")
        return value

    @classmethod
    def for_board(cls, tenant: str, board: str, card_id: str) -> "CardRef":
        """The ref of a board's card (card_key_id encodes its id); ValueError naming a refused id."""
        return cls(tenant=tenant, board=board, card_id=card_key_id(card_id))

    @property
    def key(self) -> str:
        return f"{self.tenant}/{self.board}/{self.card_id}"

    @property
    def workflow_id(self) -> str:
        return f"card/{self.key}"

    @classmethod
    def parse(cls, key: str) -> "CardRef":
        """'tenant/board/card', 'board/card' or 'card' (defaults fill the rest)."""
        parts = key.split("/")
        if len(parts) > 3 or not all(parts):
            raise ValueError(f"card key {key!r}: expected CARD, BOARD/CARD or TENANT/BOARD/CARD")
        names = ("tenant", "board", "card_id")[3 - len(parts):]
        return cls(**dict(zip(names, parts, strict=True)))


class Transition(_Value):
    """A card moved to a column that maps to `to`. `delivery_id` makes it idempotent."""

    to: Target
    delivery_id: str = Field(min_length=1, max_length=MAX_DELIVERY_ID)
    actor: str | None = Field(default=None, max_length=MAX_ACTOR)
    reason: str | None = Field(default=None, max_length=2000)


class CardComment(_Value):
    """A user's message on the card (a board comment): joins the chat history."""

    delivery_id: str = Field(min_length=1, max_length=MAX_DELIVERY_ID)
    author: str | None = Field(default=None, max_length=MAX_ACTOR)
    text: str = Field(max_length=MAX_COMMENT_CHARS)


class Retitle(_Value):
    """The card's title or URL as its board now says them (redacted like a log): the workflow's
    memo, which the Temporal UI lists, follows a rename while the run is open."""

    title: str = Field(max_length=1000)
    url: str | None = None


class StageRun(_Value):
    stage: str
    run: int
    outcome: Outcome
    reason: str = ""
    iterations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    # Turns whose history was truncated because the summarizer failed after its retries.
    truncated_turns: int = 0
    # A failure whose cause passes (the model overloaded or unreachable): worth running again.
    transient: bool = False
    # The coding agent: tool calls made, commits pushed to the card's branch, the last one.
    tool_calls: int = 0
    commits: int = 0
    last_commit: str = ""
    pull_request: str = ""  # its URL, once the stage's work is on one
    comment: str = ""       # where the run's outcome was commented (owner/name#number)
    review: str = ""        # the pull request review the review stage posted its line comments in
    # The summarizer's tokens: in cost_usd already, kept out of input/output_tokens (which the
    # token budget counts), so a line showing the run's cost can show the tokens it paid for.
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    # Prompt tokens the provider's cache served or stored (the turns' and the summarizer's): in
    # cost_usd already (each priced on its own), kept out of input_tokens as the provider does.
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # The research it made (child workflows, billed under the stage): in cost_usd already, its
    # tokens (prompt tokens with the cached ones) kept out of input/output_tokens as the summarizer's are.
    research_input_tokens: int = 0
    research_output_tokens: int = 0
    # Context sources the run went without, in words (StageProgress.unavailable).
    unavailable: tuple[str, ...] = ()


class AutoRetry(_Value):
    """A failed stage the card runs again at `due` ([retry] auto_retry_after), the
    `attempt`-th time of at most `of` in a row."""

    stage: str
    run: int
    due: datetime
    attempt: int = 1
    of: int = 1


class RetryRequest(_Value):
    """`cardloop card retry` / POST /cards/{card}/retry: run the card's failed stage again."""

    actor: str | None = Field(default=None, max_length=MAX_ACTOR)


class CancelRequest(_Value):
    """`cardloop card cancel` / POST /cards/{board}/{card}/cancel: stop the card's running stage.
    `reason`: what the stopped run records (a board's archive says what happened there); None:
    "cancelled by <actor> (card cancel)"."""

    actor: str | None = Field(default=None, max_length=MAX_ACTOR)
    reason: str | None = Field(default=None, max_length=500)


class StageProgress(BaseModel):
    model_config = _DEFERRED

    iteration: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    last_result: str = ""
    truncated_turns: int = 0
    cut_replies: int = 0  # replies the provider cut off at the output limit (max_tokens)
    # The coding agent's workspace (zero for text-only stages).
    tool_calls: int = 0
    tool_errors: int = 0
    commits: int = 0
    last_commit: str = ""
    verified: bool = False      # the last claim of COMPLETE passed the repository's tests
    ci: str = ""                # the pushed commit's CI, when the stage waits for it
    refused_claims: int = 0     # claims of COMPLETE the tests refused
    # What the run is doing now, in words ("waiting for the model (1,234 prompt tokens)"), and of
    # how many turns: `card show` says it while the card's own copy is one turn behind.
    doing: str = ""
    max_iterations: int = 0
    token_budget: int = 0  # the stage's, which tokens_spent counts against (`card show` says both)
    summary_input_tokens: int = 0   # the summarizer's (its cost is in cost_usd)
    summary_output_tokens: int = 0
    cache_read_tokens: int = 0      # the turns' and the summarizer's (StageRun)
    cache_write_tokens: int = 0
    research_input_tokens: int = 0  # the research it made (its cost is in cost_usd)
    research_output_tokens: int = 0
    # Context sources this run goes without, in words ("repository: git clone ... failed (after 3
    # attempts)"): `card move --follow` and the demo say each once, after the retries' ⟳ lines.
    unavailable: list[str] = Field(default_factory=list)


def delivery_key(delivery_id: str) -> str:
    """How a card remembers a delivery id: long ids by digest, to keep the carried state small."""
    if len(delivery_id) > 64:
        return "sha256:" + hashlib.sha256(delivery_id.encode()).hexdigest()[:40]
    return delivery_id


def tokens_spent(r: StageRun | StageProgress) -> int:
    """Every token the run spent on the model, as its cost counts them and its token budget
    limits them: the turns', the summarizer's and its research's, with the prompt tokens the
    provider's cache served or stored (priced lower, still sent and paid for)."""
    return (r.input_tokens + r.output_tokens + r.summary_input_tokens + r.summary_output_tokens
            + r.research_input_tokens + r.research_output_tokens + r.cache_read_tokens + r.cache_write_tokens)


class CardState(BaseModel):
    """What the card workflow holds and its query returns; carried across continue-as-new."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    stage: str | None = None           # the current or last stage
    status: Literal["idle", "running", "blocked", "done"] = "idle"
    iteration: int = 0
    last_result: str = ""              # a short excerpt of the last model reply
    blocked_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    stage_runs: int = 0
    history: list[StageRun] = Field(default_factory=list)   # the latest stage runs, bounded
    seen_deliveries: list[str] = Field(default_factory=list)  # bounded, oldest first
    current: StageProgress | None = None  # the running stage's progress, reported after each turn
    auto_retry: AutoRetry | None = None   # a transiently failed stage waiting to run again
    board: str = ""                       # what the last board writes did, skipped or failed, in words
    # The last run whose end the board has heard of (or that had nothing to tell it): a watcher
    # that sees run N in `history` with board_told < N knows the board's end write is still coming.
    board_told: int = 0

    def has_seen(self, delivery_id: str) -> bool:
        """Whether the card has applied a delivery with this id (it applies each id once)."""
        return delivery_key(delivery_id) in self.seen_deliveries

    @property
    def filter_status(self) -> str:
        """The status operators filter on (search attribute CardStatus, `card list --status`): the
        state's status, except that a card standing on a failed run is "failed", not merely "idle"."""
        if self.status == "idle" and self.history and self.history[-1].outcome == "failed":
            return "failed"
        return self.status


class SaveStateInput(_Value):
    card_key: str
    state: CardState


class SavedState(_Value):
    """The state the card's last run closed with; None before its first run closed."""

    state: CardState | None = None


class CardStart(_Value):
    """The card workflow's input (also after continue-as-new, with `state` carried)."""

    ref: CardRef
    title: str = Field(default="", max_length=1000)
    url: str | None = None
    repo: str | None = None
    state: CardState | None = None
    pending: list[Transition] = Field(default_factory=list)
    # Continue-as-new once the event history is longer than this (temporal.continue_as_new_after_events).
    max_history_events: int = Field(default=DEFAULT_MAX_HISTORY_EVENTS, ge=10, le=40_000)


class StageSettings(_Value):
    profile: str
    max_iterations: int
    token_budget: int
    auto_advance: bool
    next_stage: Target | None = None
    sources: list[str] = Field(default_factory=list)  # context sources gathered when the stage starts
    # Seconds after a transient failure before the card runs the stage again (0: never), and how often in a row.
    auto_retry_after: float = 0.0
    auto_retries: int = 0
    assemble_timeout: float = 60.0  # seconds per prompt.assemble attempt ([temporal] assemble_timeout)
    # The coding agent ([workspace] in config.toml): the tools this stage offers (empty: the stage's
    # turns are text only, no workspace), whether COMPLETE needs the repository's tests to pass,
    # the stuck rules and the cost budget.
    tools: list[str] = Field(default_factory=list)
    verify: bool = False
    stuck_repeats: int = 3   # the same failing tool call this many times in a row: blocked
    stuck_turns: int = 6     # this many turns in a row without a change to the branch: blocked
    cost_budget_usd: float = 0.0  # 0: none
    pull_request: bool = False  # a completed stage's pushed work gets a pull request ([workspace] pull_requests)
    comment: bool = False  # the run's outcome is commented on the card's GitHub issue or PR ([workspace] comments)
    ci_wait_seconds: float = 0.0  # after a verified COMPLETE, wait this long for the pushed commit's CI (0: never)
    ci_poll_seconds: float = 30.0
    ci_none_grace_seconds: float = 120.0
    affinity_timeout: float = 60.0  # seconds a workspace activity may wait for its worker to pick it up
    # A gathered log over this many tokens is researched (analysts + synthesizer) and the report
    # put into the prompt ([research] stages, auto_min_tokens); 0: never. None: no research settings.
    research_min_tokens: int = 0
    research: "ResearchSettings | None" = None


class GatherInput(_Value):
    card_key: str
    stage: str
    source: str
    # The activity's last attempt records the source as unavailable instead of failing.
    max_attempts: int = 3


class GatherResult(_Value):
    source: str
    status: Literal["ok", "unavailable", "skipped"]
    items: int = 0
    reason: str = ""
    # The whole logs the source kept in the store (name, blob ref, tokens): what research reads.
    logs: "list[NamedBlob]" = Field(default_factory=list)
    # status "ok" but partial: what the source could not read, each with why (one job's log, one
    # pod's log or events). A field, not a status of its own: a worker that predates it reads
    # "ok" and ignores the field (extra="ignore"), where a new status value would fail validation.
    missing: list[str] = Field(default_factory=list)


class StageInput(_Value):
    ref: CardRef
    stage: str
    run: int
    settings: StageSettings
    # True only in runs recorded with the first board writes: the card workflow wrote the run's
    # outcome to the board and the stage left its own GitHub outcome comment out. Since then the
    # stage comments as before and the GitHub board's outcome comment (same marker) edits it.
    board_comments: bool = False


class FoldNeeded(_Value):
    """The history must be folded and no cached summary covers this range yet."""

    first: int
    last: int
    max_tokens: int


class AssembleInput(_Value):
    card_key: str
    stage: str
    run: int
    iteration: int
    profile: str
    tools: list[str] = Field(default_factory=list)  # offered to the model as its native tools
    # The stage run's workflow id: its messages' dedup keys start with it, so the first of them
    # is where the run's turns begin. Empty: not a stage run (the context joins the current turn).
    run_key: str = Field(default="", max_length=500)


class AssembleResult(_Value):
    prompt_ref: str
    tokens: dict[str, int]
    total_tokens: int
    history_mode: str
    fold: FoldNeeded | None = None
    redactions: int = 0


class SummarizeInput(_Value):
    card_key: str
    first: int
    last: int
    max_tokens: int
    # Prefixes the key of every model call of this summarize (the same across its retries); ""
    # (runs recorded before): the run id and activity id of the attempt's own info.
    key: str = ""


class KeptInput(_Value):
    """The calls kept under `key` (every call key that starts `key/`): what a step that failed
    or was cancelled paid for, since it could not say so itself (a research run, a summarize)."""

    card_key: str
    key: str


class KeptUsage(_Value):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


class SummarizeResult(_Value):
    tokens: int
    method: str  # "cached" | "llm" | "incremental" | "recursive"
    calls: int = 0
    cost_usd: float = 0.0
    # What the summarizer's calls used (0 for a cached summary, which cost nothing either).
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class CompleteInput(_Value):
    card_key: str
    stage: str
    run: int
    iteration: int
    profile: str
    prompt_ref: str
    # Unique per model call: the history message and the usage row are recorded once under it.
    call_key: str


class CompleteResult(_Value):
    message_seq: int
    promise: Promise | None = None
    reason: str = ""
    excerpt: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0  # the usage of the call whose reply was kept: the turn's own
    # True: an earlier attempt had stored this reply; it was returned without calling the model.
    reused: bool = False
    tool_calls: "list[ToolCallOut]" = Field(default_factory=list)  # the tools the model asked to run
    # The provider ended the reply short of its end: "max_tokens" (cut at the output limit) or
    # "malformed_function_call"; "" for a whole reply (and for one an earlier attempt stored).
    stopped: str = ""


class ToolCallOut(_Value):
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class WorkspaceInput(_Value):
    card_key: str
    stage: str
    run: int
    # The worker that held the worktree was lost: what it left uncommitted (a command cut off
    # half-way) is discarded, so the worktree is the last checkpoint, as the model is told.
    reopen: bool = False


class WorkspaceInfo(_Value):
    queue: str          # the task queue of the worker holding the worktree
    branch: str
    head: str           # the commit the worktree is on
    created_from: str   # "origin/<branch>", "default branch <sha>", "existing worktree"
    test_command: str | None = None
    protections: list[str] = Field(default_factory=list)  # the sandbox's active protections


class ToolInput(_Value):
    card_key: str
    stage: str
    call_id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    dedup_key: str      # the tool result's key in the history: a retried activity returns it
    tools: list[str] = Field(default_factory=list)  # what the stage offers; anything else is refused
    # review_comment: the stage's review already holds as many line comments as it carries
    # (workflows/workspace.py MAX_REVIEW_COMMENTS): the call is refused, and the model told so
    review_full: bool = False


class ToolOutcome(_Value):
    message_seq: int
    is_error: bool
    excerpt: str = ""
    reused: bool = False  # an earlier attempt had recorded this result


class CheckpointInput(_Value):
    card_key: str
    run: int
    turn: int


class CheckpointResult(_Value):
    sha: str = ""
    committed: bool = False
    pushed: bool = False
    files: list[str] = Field(default_factory=list)
    rejected: str = ""  # the remote refused the push: git's (redacted) words


class PullRequestInput(_Value):
    card_key: str
    key: str            # the stage run's key: a retried activity returns the recorded pull request
    branch: str
    summary: str = Field(default="", max_length=8_000)       # the agent's own account (finish)
    verification: str = Field(default="", max_length=4_000)  # the passing test run


class PullRequestOutcome(_Value):
    number: int = 0
    url: str = ""
    created: bool = False
    skipped: str = ""   # why no pull request was made (no token, no repository)


class LineComment(_Value):
    path: str = Field(min_length=1, max_length=1_000)
    line: int = Field(ge=1)
    body: str = Field(min_length=1, max_length=2_000)


class ReviewInput(_Value):
    card_key: str
    key: str             # the review's marker: a retry finds the review it posted
    branch: str
    body: str = Field(default="", max_length=8_000)
    comments: list[LineComment] = Field(default_factory=list, max_length=200)


class ReviewPosted(_Value):
    url: str = ""
    inline: int = 0
    in_body: int = 0
    skipped: str = ""


class CIInput(_Value):
    card_key: str
    sha: str


class CIResult(_Value):
    state: Literal["none", "pending", "failure", "success", "skipped"]
    summary: str = ""
    failing: str = Field(default="", max_length=24_000)  # the failed jobs' excerpts
    skipped: str = ""  # why CI could not be read (no token, no repository)


class CommentInput(_Value):
    card_key: str
    key: str            # the comment's marker: one comment per stage run, edited by a retry
    stage: str
    run: int
    outcome: str
    reason: str = Field(default="", max_length=8_000)
    branch: str = ""
    pull_request: str = ""


class BoardCommentInput(_Value):
    """A comment on the card's board: `key` is its marker (`<card>/<run>/<kind>`), one comment per key."""

    card_key: str
    key: str = Field(min_length=1, max_length=600)
    kind: Literal["started", "outcome"]
    stage: str
    run: int
    outcome: str = ""          # the run's outcome (kind "outcome")
    reason: str = Field(default="", max_length=8_000)
    pull_request: str = ""
    next_stage: str = ""       # where auto-advance takes the card
    retry: str = Field(default="", max_length=1_000)  # a failed run: how it runs again, in words


class BoardMoveInput(_Value):
    """The card to the column of `stage` on its board, or, with `blocked`, to the blocked column or
    label; with `unblock` (a blocked card runs `stage` again), out of the blocked column or label."""

    card_key: str
    key: str = Field(min_length=1, max_length=600)
    stage: str = ""
    blocked: bool = False
    unblock: bool = False


class BoardWrite(_Value):
    """What a board write did (`done`), why it did nothing (`skipped`: no credential, no column) or
    why it failed for good (`failed`: 401/403/404, the board's words). Recorded on the card."""

    done: str = ""
    skipped: str = ""
    failed: str = ""
    target: str = ""
    column: str = ""  # a move: the column the card is in now (its echo from the board is ours)
    # Skipped for want of a credential (not turned off): what would have been written, in words
    # ("would comment: ..."), so a board-less run (the demo) shows what goes back.
    would: str = ""

    def line(self) -> str:
        if self.failed:
            return f"failed: {self.failed}"
        if self.would:
            return f"{self.would} (skipped: {self.skipped})"
        return f"skipped: {self.skipped}" if self.skipped else self.done


class CommentOutcome(_Value):
    comment_id: int = 0
    target: str = ""    # owner/name#number
    skipped: str = ""   # why no comment was made


class VerifyInput(_Value):
    card_key: str
    stage: str
    dedup_key: str  # the verification's note in the history


class VerifyResult(_Value):
    passed: bool
    command: str = ""
    excerpt: str = ""
    message_seq: int = 0
    no_command: bool = False  # nothing says how to run this repository's tests


class AppendInput(_Value):
    card_key: str
    role: Literal["user", "assistant", "tool"]
    text: str = Field(max_length=32_000)
    author: str | None = None
    dedup_key: str
    stage: str | None = None
    # role "tool": the call this answers (the research tool's report, answered by the workflow).
    tool_call_id: str | None = None
    is_error: bool = False


# --- research over large artifacts (issue 14; workflows/research.py) ---------------------------


class NamedBlob(_Value):
    """An artifact already in the store as a blob (its text redacted), to research under `name`."""

    name: str = Field(min_length=1, max_length=500)
    ref: str
    tokens: int = 0  # its size in tokens (estimated for very large texts)


class ResearchSettings(_Value):
    """[research] as the workflow runs it: resolved once at the entry point, so a run's history
    says which models and bounds it used."""

    analyst_profile: str
    analyst_model: str
    synthesizer_profile: str
    synthesizer_model: str
    chunk_tokens: int = 2_000
    overlap_lines: int = 3
    max_queries: int = 8
    max_chunks: int = 40
    batch_chunks: int = 4
    concurrency: int = 4
    analyst_max_tokens: int = 2_000
    analyst_temperature: float = 0.0
    synthesizer_max_tokens: int = 4_096
    synthesizer_temperature: float = 0.1
    synthesizer_window: int = 24_000
    max_tool_rounds: int = 4


class ResearchInput(_Value):
    card_key: str
    question: str = Field(min_length=1, max_length=4_000)
    blobs: list[NamedBlob] = Field(default_factory=list)
    settings: ResearchSettings
    stage: str = "research"  # the ledger's stage column for the research's model calls
    # Put the report into the card's context (kind research) with its provenance.
    attach: bool = False


class BuffersInput(_Value):
    card_key: str
    blobs: list[NamedBlob]
    chunk_tokens: int
    overlap_lines: int


class BufferInfo(_Value):
    buffer_id: int
    name: str
    lines: int
    tokens: int
    chunks: int


class PlanInput(_Value):
    card_key: str
    key: str  # the effect key (deterministic: the workflow id)
    question: str
    buffer_ids: list[int]
    settings: ResearchSettings
    stage: str = "research"


class PlanResult(_Value):
    queries: list[str] = Field(default_factory=list)
    chunk_ids: list[int] = Field(default_factory=list)
    chunks_total: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class AnalyzeInput(_Value):
    card_key: str
    key: str
    question: str
    buffer_ids: list[int]
    chunk_ids: list[int]
    settings: ResearchSettings
    stage: str = "research"


class AnalyzeResult(_Value):
    status: Literal["ok", "skipped"]
    calls: int = 0
    chunks: int = 0
    relevant: int = 0  # chunks whose relevance is not none
    findings: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    reason: str = ""


class SynthesizeInput(_Value):
    card_key: str
    key: str
    question: str
    buffer_ids: list[int]
    batch_keys: list[str]  # the analyst batches' keys, whose findings are in the store
    chunks_total: int = 0
    batches_skipped: int = 0
    settings: ResearchSettings
    stage: str = "research"
    attach: bool = False
    workflow_id: str = ""


class ResearchResult(_Value):
    report_ref: str = ""
    excerpt: str = ""
    chunks_total: int = 0
    chunks_analysed: int = 0
    chunks_read: list[int] = Field(default_factory=list)  # analysed, plus read by the synthesizer's tools
    buffers: list[str] = Field(default_factory=list)
    queries: list[str] = Field(default_factory=list)
    analyst_calls: int = 0
    batches: int = 0
    batches_skipped: int = 0
    synthesizer_calls: int = 0
    tool_calls: int = 0
    groups: int = 0  # >0: the findings were synthesized in this many groups, then merged
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class ResearchProgress(BaseModel):
    model_config = _DEFERRED

    phase: str = "starting"
    batches_total: int = 0
    batches_done: int = 0
    batches_skipped: int = 0
    chunks_total: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def build_models() -> None:
    """Build every model here now: a long-running process (the worker, the API) pays for them at
    start as it did before defer_build, not in its first workflow task or request (and never in
    two threads at once)."""
    for value in list(globals().values()):
        if (isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == __name__
                and not value.__pydantic_complete__):
            value.model_rebuild()
