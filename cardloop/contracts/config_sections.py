"""The sections of config.toml, one pydantic model each; `Config` (config.py) holds them all,
loads the file with its environment overrides and checks what spans sections."""

# No `from __future__ import annotations`: every command loads these models, and pydantic would
# evaluate each field's annotation from its string first (payloads.py says more).
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from cardloop.contracts.payloads import DEFAULT_MAX_HISTORY_EVENTS, Target
from cardloop.contracts.retry import Seconds
from cardloop.prompts.card import ContextKind
from cardloop.prompts.stages import Stage
from cardloop.prompts.tenant_id import MAX_TENANT_CHARS, TENANT_PATTERN


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _expandable(value: str) -> str:
    """A path the code expands with Path.expanduser: '~nobody/x' raises RuntimeError there, from
    deep inside whichever command first opens it."""
    if value.startswith("~"):
        try:
            Path(value).expanduser()
        except RuntimeError:
            raise ValueError(f"{value!r}: no user {value.split('/')[0][1:]!r} on this machine") from None
    return value


# A file or directory path of this machine; '~' and '~user' are expanded.
UserPath = Annotated[str, AfterValidator(_expandable)]

_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


class TemporalConfig(_Section):
    # Empty: the dev stack's, on 127.0.0.1 at dev.temporal_port / dev.ui_port (Config fills them in),
    # so the card commands find the `cardloop dev` that the same configuration starts.
    address: str = ""
    namespace: str = "default"
    task_queue: str = "cardloop"
    ui_url: str = ""
    tls: bool = False
    tls_server_name: str = ""
    tls_ca_cert: UserPath = ""
    tls_client_cert: UserPath = ""
    tls_client_key: UserPath = ""
    api_key_env: str = "TEMPORAL_API_KEY"
    max_concurrent_activities: int = Field(default=64, ge=1, le=10_000)
    continue_as_new_after_events: int = Field(default=DEFAULT_MAX_HISTORY_EVENTS, ge=10, le=40_000)
    # Payloads (card text, prompts, logs, chat, failure messages) are AES-GCM encrypted before they
    # reach Temporal's database; off only when explicitly turned off.
    encrypt_payloads: bool = True
    codec_keys_env: str = "CARDLOOP_CODEC_KEYS"
    # A webhook's signal or start waits at most this long for Temporal (boards time out at ~10 s).
    rpc_timeout: Seconds = Field(default=3.0, gt=0)
    # `cardloop api` and `cardloop worker` started while Temporal is down retry connecting, backing off to this.
    reconnect_max_interval: Seconds = Field(default=30.0, gt=0)

    # Seconds one attempt of prompt assembly (a local activity) may take; recorded per stage run.
    assemble_timeout: float = Field(default=60.0, gt=0, le=600)

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        # The SDK raises a bare ValueError on a port it cannot parse, mid-command.
        found = _HOST_PORT.fullmatch(value)
        if value and not (found and 1 <= int(found.group(1)) <= 65535):
            raise ValueError(f"{value!r}: expected HOST:PORT with a port 1 to 65535 and no scheme, e.g. "
                             "temporal.example.com:7233 or my-ns.a1b2c.tmprl.cloud:7233")
        return value


class WorkerConfig(_Section):
    # A tiny HTTP endpoint for Kubernetes probes (/livez, /readyz); 0 turns it off.
    health_host: str = "127.0.0.1"
    health_port: int = Field(default=0, ge=0, le=65535)
    health_interval: float = Field(default=10.0, gt=0, le=300)
    # On SIGTERM, activities get this long to finish before they are cancelled (and retried elsewhere).
    graceful_shutdown_seconds: int = Field(default=60, ge=0, le=3600)


class ObservabilityConfig(_Section):
    # Prometheus text on http://metrics_host:metrics_port/metrics, served by `cardloop worker` and
    # `cardloop api` (each process its own, apart from the API's public port): cardloop's metrics
    # and, on a worker, the Temporal SDK's. 0 turns it off.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # OpenTelemetry traces (Temporal's interceptor, FastAPI's) over OTLP/HTTP: on with tracing = true
    # or with OTEL_EXPORTER_OTLP_ENDPOINT set; the exporter reads the standard OTEL_* variables.
    tracing: bool = False
    service_name: str = Field(default="cardloop", min_length=1, max_length=100)
    # Logs of `cardloop worker` and `cardloop api`: "auto" writes JSON lines when stderr is not a
    # terminal, text on a terminal; every line passes the secret redactor.
    log_format: Literal["auto", "json", "text"] = "auto"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class CodecServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8089, ge=1, le=65535)
    cors_origins: list[str] = Field(default_factory=lambda: ["http://127.0.0.1:8233", "http://localhost:8233"])
    token_env: str = "CARDLOOP_CODEC_SERVER_TOKEN"


class StoreConfig(_Section):
    # Empty: cardloop.sqlite in dev.data_dir (Config fills it in): one data dir, one whole stack.
    url: str = ""
    # Blob contents (prompts, context, logs) encrypted at rest with the payload codec's keys, when
    # those are configured (temporal.codec_keys_env's variable is set); false: never.
    encrypt_blobs: bool = True


class DevConfig(_Section):
    data_dir: UserPath = "~/.local/share/cardloop"
    temporal_port: int = Field(default=7233, ge=1, le=65535)
    ui_port: int = Field(default=8233, ge=1, le=65535)
    model_port: int = Field(default=0, ge=0, le=65535)  # the scripted model's; 0: a free one
    retention: str = Field(default="720h", pattern=r"^\d+[hms]$")


class SummarizerConfig(_Section):
    profile: str = "claude-fast"
    max_input_tokens: int = Field(default=60_000, ge=1_000)
    max_tokens: int = Field(default=2_000, ge=100)


class ResearchConfig(_Section):
    """Research over artifacts too large for any prompt (README "Research"): a planner turns the
    question into search queries, analysts read the best chunks in parallel batches, a
    synthesizer writes the cited report. Models per role: the profile's provider and key, the
    model named here when set (CARDLOOP_ANALYST_MODEL / CARDLOOP_SYNTHESIZER_MODEL, --*-model)."""

    analyst_profile: str = "claude-fast"
    analyst_model: str = ""          # empty: the profile's model
    synthesizer_profile: str = "claude"
    synthesizer_model: str = ""
    # Buffers and chunks: token-bounded chunks on line boundaries, a few lines repeated between them.
    chunk_tokens: int = Field(default=2_000, ge=64, le=32_000)
    overlap_lines: int = Field(default=3, ge=0, le=100)
    # Plan and search: at most this many queries, at most this many chunks analysed.
    max_queries: int = Field(default=8, ge=1, le=32)
    max_chunks: int = Field(default=40, ge=1, le=2_000)
    # Analysts: chunks per call, calls at once.
    batch_chunks: int = Field(default=4, ge=1, le=32)
    concurrency: int = Field(default=4, ge=1, le=64)
    analyst_max_tokens: int = Field(default=2_000, ge=100)
    analyst_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # Synthesizer: findings over synthesizer_window tokens are grouped and synthesized per group.
    synthesizer_max_tokens: int = Field(default=4_096, ge=256)
    synthesizer_temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    synthesizer_window: int = Field(default=24_000, ge=1_000)
    max_tool_rounds: int = Field(default=4, ge=0, le=16)
    # Stages that research a gathered log larger than this many tokens by themselves (0: the
    # stage's context budget), and put the report into the prompt.
    stages: list[Stage] = Field(default_factory=lambda: [Stage.ERROR_FIXING])
    auto_min_tokens: int = Field(default=0, ge=0)
    # A worker keeps the research indexes it built (the logs' text and BM25 postings) for the
    # run's later activities, least recently used evicted beyond this many MB. A worker setting,
    # not a workflow input: it changes memory, never a result.
    index_cache_mb: int = Field(default=256, ge=1)


class PriceConfig(_Section):
    """USD per million tokens. A cache price left out is the input price: every provider bills
    cached prompt tokens (OpenAI and Gemini report cache reads without being asked), and a
    price of 0 made them free in the ledger and the spend caps. Set them from the price list."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    cache_write: float = Field(default=0.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _cache_prices_default_to_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and "input" in data:
            return {"cache_read": data["input"], "cache_write": data["input"], **data}
        return data


StageTarget = Target


class ApiConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1_024, le=64 * 1_048_576)


class GatewayConfig(_Section):
    profile: str = "claude"


class TenantPromptsConfig(_Section):
    """The guard model, the third layer of tenant prompt validation (prompts/injection/guard.py):
    empty guard_profile, none; a profile, every PUT that passes the offline layers is also read by
    that model, and its verdict and reason are stored with the version."""

    guard_profile: str = ""
    guard_max_tokens: int = Field(default=300, ge=50, le=4_000)
    # A PUT waits for the guard: a stalled model answers 503 after this, not after the stages' 600 s.
    guard_timeout_seconds: float = Field(default=30.0, ge=1.0, le=300.0)


class BoardConfig(_Section):
    """One board's webhook settings; the board-specific keys are optional."""

    tenant: str = Field(default="default", max_length=MAX_TENANT_CHARS, pattern=TENANT_PATTERN)
    # A key the board's payload carries (org login, organization id, project key, board id;
    # the generic body's `tenant`) -> the tenant it belongs to. A claim, checked against the
    # tenant whose secret signed the delivery, never trusted on its own.
    tenants: dict[str, str] = Field(default_factory=dict)
    # Tenant -> the environment variable holding that tenant's webhook secret for this board.
    # The board's own variable (e.g. CARDLOOP_GENERIC_WEBHOOK_SECRET) is `tenant`'s secret.
    secrets: dict[Annotated[str, Field(max_length=MAX_TENANT_CHARS, pattern=TENANT_PATTERN)],
                  Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")]] = Field(default_factory=dict)
    # A signed delivery whose event time (from its body) is further than this from now is
    # refused as a replay; 0 turns the check off. Linear's own 60 s check is separate.
    replay_window_seconds: float = Field(default=86_400.0, ge=0)
    columns: dict[str, StageTarget] = Field(default_factory=dict)
    # github
    graphql_url: str = "https://api.github.com/graphql"
    token_env: str = "CARDLOOP_GITHUB_TOKEN"
    status_field: str = "Status"
    failure_stage: StageTarget | Literal[""] = "error_fixing"
    # trello
    callback_url: str = ""
    # Writing back to the board (cardloop/integrations/board_clients/): the environment variable
    # holding the credential that writes ("": cardloop never writes to this board; a variable that
    # is not set: writes are skipped and the stage says so), the API the client calls (empty: the
    # board's public API; Jira Cloud: https://SITE.atlassian.net; generic: the URL the outgoing
    # webhook goes to), the column each stage moves the card to where the reverse of `columns` is
    # ambiguous, and where a blocked card goes: a column, else a label.
    write_token_env: str = Field(default="", pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,199})?$")
    api_url: str = Field(default="", pattern=r"^(https?://\S+)?$")
    write_columns: dict[StageTarget, str] = Field(default_factory=dict)
    blocked_column: str = ""
    blocked_label: str = ""
    # Who cardloop's writes appear as on the board (the token's user, bot or member name): a
    # delivery made by it is our own write coming back, acknowledged without a transition.
    write_actor: str = ""
    # A delivery that moves a card into the column cardloop moved it to within this many seconds
    # is our own move coming back (when the board does not say who moved it).
    echo_window_seconds: float = Field(default=900.0, ge=0)
    # github: the Projects v2 project (node id "PVT_...") whose Status field is written; empty:
    # the project the card's issue is in (the first, when it is in several).
    project: str = ""

    @model_validator(mode="after")
    def _write_columns_agree(self) -> "BoardConfig":
        for stage, column in self.write_columns.items():
            mapped = self.stage_for(column)
            if not column.strip():
                raise ValueError(f"write_columns.{stage} is empty: name the column cards move to in {stage}")
            if mapped is not None and mapped != stage:
                raise ValueError(f"write_columns.{stage} = {column!r}, but columns maps {column!r} to {mapped}: "
                                 "the board's webhook for that move would start another stage")
        if self.write_token_env:
            for stage in sorted({s for s in self.columns.values()} - set(self.write_columns)):
                named = [c for c, s in self.columns.items() if s == stage]
                if len(named) > 1:
                    raise ValueError(f"columns {', '.join(repr(c) for c in named)} all map to {stage}: name the one "
                                     f"cardloop moves cards to, write_columns.{stage} = {named[-1]!r}")
        if self.blocked_column and self.stage_for(self.blocked_column) is not None:
            raise ValueError(f"blocked_column {self.blocked_column!r} is mapped to a stage in columns: a blocked "
                             "card moved there would start that stage")
        return self

    def write_column(self, stage: str) -> str | None:
        """The column a card in `stage` is moved to: write_columns, else the one column that
        `columns` maps to it (None: no column shows that stage)."""
        if stage in self.write_columns:
            return self.write_columns[stage]  # type: ignore[index]
        named = [c for c, s in self.columns.items() if s == stage]
        return named[-1] if named else None

    def stage_for(self, column: str | None) -> StageTarget | None:
        """The stage a column maps to; names match case- and space-insensitively."""
        if not column:
            return None
        norm = " ".join(column.split()).casefold()
        for name, stage in self.columns.items():
            if " ".join(name.split()).casefold() == norm:
                return stage
        return None

    def named_tenant(self, key: str | None) -> str | None:
        """The tenant a payload's key names through `tenants`; None when it names none."""
        return self.tenants.get(key) if key else None


class PathsConfig(_Section):
    prompt_overrides: UserPath = "~/.config/cardloop/prompts"


class TokensConfig(_Section):
    encoding: str = "cl100k_base"


class BudgetConfig(_Section):
    system: int = Field(default=1_000, ge=0)
    agent: int = Field(default=1_500, ge=0)
    history: int = Field(default=10_000, ge=0)
    context: int = Field(default=15_000, ge=0)
    total: int = Field(default=27_500, gt=0)


class BudgetOverride(_Section):
    system: int | None = Field(default=None, ge=0)
    agent: int | None = Field(default=None, ge=0)
    history: int | None = Field(default=None, ge=0)
    context: int | None = Field(default=None, ge=0)
    total: int | None = Field(default=None, gt=0)


class HistoryConfig(_Section):
    tail_fraction: float = Field(default=0.5, gt=0, lt=1)
    pinned_fraction: float = Field(default=0.08, ge=0, lt=0.5)
    first_request_max_fraction: float = Field(default=0.2, ge=0, lt=1)
    min_summary_tokens: int = Field(default=200, ge=0)
    fold_step_fraction: float = Field(default=0.8, ge=0, le=1)


class ContextConfig(_Section):
    max_item_tokens: int = Field(default=6_000, gt=0)
    min_item_tokens: int = Field(default=120, ge=1)
    card_max_tokens: int = Field(default=2_000, gt=0)
    priorities: dict[ContextKind, int] = Field(default_factory=dict)
    stages: dict[ContextKind, list[Stage]] = Field(default_factory=dict)
    sources: dict[Stage, list[str]] = Field(default_factory=dict)  # names: the sources' registry


class GitHubSourceConfig(_Section):
    api_url: str = "https://api.github.com"
    graphql_url: str = ""  # empty: derived from api_url
    token_env: str = "CARDLOOP_GITHUB_TOKEN"
    app_id_env: str = "CARDLOOP_GITHUB_APP_ID"
    app_private_key_env: str = "CARDLOOP_GITHUB_APP_PRIVATE_KEY"
    installation_id: int = Field(default=0, ge=0)
    max_runs: int = Field(default=3, ge=1, le=20)
    excerpt_tokens: int = Field(default=4_000, ge=200)
    timeout: float = Field(default=30.0, gt=0)


class K8sServiceConfig(_Section):
    namespace: str = Field(min_length=1)
    selector: str = Field(min_length=1)


class KubernetesSourceConfig(_Section):
    kubeconfig: UserPath = ""
    context: str = ""
    tail_lines: int = Field(default=300, ge=1)
    since_seconds: int = Field(default=86_400, ge=1)
    excerpt_tokens: int = Field(default=3_000, ge=200)
    timeout: float = Field(default=15.0, gt=0)
    services: dict[str, K8sServiceConfig] = Field(default_factory=dict)


class RepositorySourceConfig(_Section):
    cache_dir: UserPath = "~/.cache/cardloop/repos"
    clone_url: str = "https://github.com/{repo}.git"
    token_env: str = "CARDLOOP_GITHUB_TOKEN"
    depth: int = Field(default=50, ge=1)
    history_weight: float = Field(default=1.0, ge=0.0, le=10.0)
    adr_globs: list[str] = Field(default_factory=lambda: ["docs/adr/**/*.md", "doc/architecture/decisions/**/*.md"])
    doc_globs: list[str] = Field(default_factory=list)
    max_files: int = Field(default=8, ge=0, le=100)
    max_file_tokens: int = Field(default=2_500, ge=100)
    max_adrs: int = Field(default=3, ge=0, le=50)


class SourcesConfig(_Section):
    github: GitHubSourceConfig = GitHubSourceConfig()
    kubernetes: KubernetesSourceConfig = KubernetesSourceConfig()
    repository: RepositorySourceConfig = RepositorySourceConfig()


# "owner/name", each part of GitHub's name characters plus fnmatch's * and ? (no [...] classes).
REPO_PATTERN = re.compile(r"^[A-Za-z0-9_.*?-]+/[A-Za-z0-9_.*?-]+\Z")


class TokenLimits(_Section):
    """Each API token of a tenant on its own (the gateway's callers); 0: no limit."""

    requests_per_minute: int = Field(default=0, ge=0, le=1_000_000)
    tokens_per_day: int = Field(default=0, ge=0)
    cost_usd_per_month: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class LimitsConfig(TokenLimits):
    """Spend and abuse limits per tenant (cardloop.contracts.limits): model calls of its cards and
    of the prompt gateway together, checked before each call; 0: no limit. `[limits]` is every
    tenant's default; `[tenants.<t>.limits]` replaces the keys it sets for that tenant."""

    per_token: TokenLimits | None = None


class TenantConfig(_Section):
    """What one tenant's cards may read from GitHub, and with which token
    (cardloop.integrations.access), and its spend limits (`limits`, over [limits])."""

    # The environment variable holding this tenant's GitHub token, used by the github_* sources
    # and by git (repository source). Empty: the service's credentials ([sources.github],
    # [sources.repository]), still only for the repositories below.
    github_token_env: str = Field(default="", pattern=r"^(?:[A-Za-z_][A-Za-z0-9_]{0,199})?$")
    # "owner/name" patterns, case-insensitive, `*` and `?` within one part ("acme/*"); a card
    # naming any other repository gets none of its context. Empty: no repository at all.
    repos: list[str] = Field(default_factory=list)
    # Over [limits]: the keys set here replace the default's for this tenant.
    limits: LimitsConfig | None = None


# The workspace tools (cardloop.integrations.workspace.tools names the same set; a test ties them).
ToolName = Literal["read_file", "write_file", "edit_file", "list_files", "search", "run_command", "git_diff",
                   "git_status", "finish", "block", "review_comment", "research"]
TOOL_NAMES: tuple[str, ...] = ToolName.__args__  # type: ignore[attr-defined]
WRITE_TOOLS = frozenset({"write_file", "edit_file", "run_command"})
READ_ONLY_STAGES = ("planning", "review")
_READ_TOOLS = ["read_file", "list_files", "search", "git_diff", "git_status", "finish", "block"]


class SandboxConfig(_Section):
    """run_command's limits (cardloop.integrations.workspace.sandbox)."""

    timeout_seconds: float = Field(default=300.0, gt=0, le=86_400)
    output_bytes: int = Field(default=1_000_000, ge=1_000)
    cpu_seconds: int = Field(default=600, ge=1)
    memory_mb: int = Field(default=4_096, ge=64)
    max_processes: int = Field(default=512, ge=8)
    max_file_mb: int = Field(default=512, ge=1)
    network: Literal["deny", "allow"] = "deny"
    env_allow: list[str] = Field(default_factory=lambda: ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"])
    # More directories or files no command may see (where a mount namespace can be made), beside
    # those always hidden: [workspace] root, [sources.repository] cache_dir, dev.data_dir and a
    # SQLite store's files.
    hide_paths: list[str] = Field(default_factory=list)


class WorkspaceConfig(_Section):
    # true: stages act in a git worktree of the card's repository with the tools below (cards
    # without a repository stay text only); false: every stage's turns are text.
    enabled: bool = False
    root: UserPath = "~/.local/share/cardloop/workspaces"
    # The agent is stuck when the same tool call fails this many times in a row, or when this
    # many turns in a row change nothing on the branch (write stages): the stage ends blocked.
    stuck_repeats: int = Field(default=3, ge=2, le=100)
    stuck_turns: int = Field(default=6, ge=2, le=1_000)
    # Seconds a tool call may wait for the worker holding the worktree to pick it up; past it the
    # workspace is made again on another worker from the card's last checkpoint.
    affinity_timeout: float = Field(default=60.0, gt=0, le=3_600)
    # How often a worker removes the workspaces of done cards and applies max_age_hours / max_size_mb.
    cleanup_interval_seconds: float = Field(default=600.0, gt=0)
    # Stages whose completed, pushed work gets a pull request (found by head branch and updated,
    # else created) when the tenant has a GitHub token; others only push the branch.
    pull_requests: list[Stage] = Field(default_factory=lambda: [Stage.CODING, Stage.ERROR_FIXING])
    # A stage run that ends completed, blocked or out of budget comments its outcome (and the plan
    # or the review) on the card's GitHub issue or pull request, when the tenant has a token.
    comments: bool = True
    # After a verified COMPLETE in these stages, wait for the pushed commit's GitHub Actions runs:
    # a failure goes back to the model with the failed jobs' logs; no run within ci_none_grace
    # seconds means the repository has no CI for it (accepted); still running after
    # ci_wait_seconds blocks the stage.
    ci_stages: list[Stage] = Field(default_factory=lambda: [Stage.ERROR_FIXING])
    ci_wait_seconds: float = Field(default=1_200.0, ge=0)
    ci_poll_seconds: float = Field(default=30.0, gt=0)
    ci_none_grace_seconds: float = Field(default=120.0, ge=0)
    max_size_mb: int = Field(default=20_000, ge=1)
    max_age_hours: float = Field(default=168.0, gt=0)
    result_max_chars: int = Field(default=20_000, ge=1_000)
    test_timeout_seconds: float = Field(default=900.0, gt=0)
    # "owner/name" = "command": the repository's test command; unlisted repositories are detected.
    test_commands: dict[str, str] = Field(default_factory=dict)
    sandbox: SandboxConfig = SandboxConfig()
    tools: dict[Stage, list[ToolName]] = Field(default_factory=lambda: {
        Stage.PLANNING: list(_READ_TOOLS), Stage.REVIEW: [*_READ_TOOLS, "review_comment"],
        **{s: [*_READ_TOOLS[:3], "write_file", "edit_file", "run_command", *_READ_TOOLS[3:]]
           for s in (Stage.CODING, Stage.TESTING)},
        Stage.ERROR_FIXING: [*_READ_TOOLS[:3], "write_file", "edit_file", "run_command", *_READ_TOOLS[3:],
                             "research"]})

    def tools_for(self, stage: Stage) -> list[str]:
        return list(self.tools.get(stage, []))


class ProviderConfig(_Section):
    format: str
    default_system_prompt: str = "You are a helpful assistant."


class ModelConfig(_Section):
    context_window: int = Field(gt=0)
    calibration: float = Field(default=1.0, ge=1.0, le=3.0)
    # The shortest prefix the provider caches (Anthropic: per model); a breakpoint on a shorter
    # prefix is wasted, so none is placed there. 0: the provider caches prefixes automatically.
    min_cache_tokens: int = Field(default=1024, ge=0)
    budget: BudgetOverride = BudgetOverride()
    price: PriceConfig = PriceConfig()


class ProfileConfig(_Section):
    provider: str
    model: str
    api_key_env: str = ""
    base_url: str = ""
    max_tokens: int = Field(default=4_096, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    system_prompt: str = ""


class StageConfig(_Section):
    profile: str
    max_iterations: int = Field(default=8, ge=1, le=1_000)
    token_budget: int = Field(default=500_000, ge=1)
    auto_advance: bool = False
    next: Target | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    budget: BudgetOverride = BudgetOverride()
    auto_retry_after: Seconds | None = None   # None: [retry] auto_retry_after
    cost_budget_usd: float = Field(default=0.0, ge=0)  # 0: no cost budget; else the stage ends when spent
