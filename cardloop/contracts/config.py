"""Loading config.toml plus environment overrides, validated once at start-up.

A wrong configuration fails here, before any work starts, with a message that names the
key: unknown keys, a section budget larger than the total, a total larger than the model's
context window minus max_tokens, unknown stage, profile, provider or model names.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cardloop.contracts.errors import ConfigError
from cardloop.contracts.payloads import DEFAULT_MAX_HISTORY_EVENTS, Target
from cardloop.contracts.retry import RetryConfig, Seconds
from cardloop.contracts.secrets import Secret, secret_from_env
from cardloop.prompts.card import ContextKind
from cardloop.prompts.formats import resolve_format
from cardloop.prompts.settings import (
    AssemblySettings,
    ContextSettings,
    HistorySettings,
    PromptSource,
    TokenBudget,
)
from cardloop.prompts.stages import STAGE_NAMES, Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter, TokenizerError

ENV_PREFIX = "CARDLOOP_"
ENV_CONFIG_FILE = "CARDLOOP_CONFIG"
REPO_CONFIG = Path(__file__).resolve().parents[2] / "config.toml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TemporalConfig(_Section):
    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "cardloop"
    ui_url: str = "http://127.0.0.1:8233"
    tls: bool = False
    tls_server_name: str = ""
    tls_ca_cert: str = ""
    tls_client_cert: str = ""
    tls_client_key: str = ""
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


class WorkerConfig(_Section):
    # A tiny HTTP endpoint for Kubernetes probes (/livez, /readyz); 0 turns it off.
    health_host: str = "127.0.0.1"
    health_port: int = Field(default=0, ge=0, le=65535)
    health_interval: float = Field(default=10.0, gt=0, le=300)
    # On SIGTERM, activities get this long to finish before they are cancelled (and retried elsewhere).
    graceful_shutdown_seconds: int = Field(default=60, ge=0, le=3600)


class CodecServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8089, ge=1, le=65535)
    cors_origins: list[str] = Field(default_factory=lambda: ["http://127.0.0.1:8233", "http://localhost:8233"])
    token_env: str = "CARDLOOP_CODEC_SERVER_TOKEN"


class StoreConfig(_Section):
    url: str = "sqlite:///~/.local/share/cardloop/cardloop.sqlite"


class DevConfig(_Section):
    data_dir: str = "~/.local/share/cardloop"
    temporal_port: int = Field(default=7233, ge=1, le=65535)
    ui_port: int = Field(default=8233, ge=1, le=65535)
    retention: str = Field(default="720h", pattern=r"^\d+[hms]$")


class SummarizerConfig(_Section):
    profile: str = "claude-fast"
    max_input_tokens: int = Field(default=60_000, ge=1_000)
    max_tokens: int = Field(default=2_000, ge=100)


class PriceConfig(_Section):
    """USD per million tokens."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    cache_write: float = Field(default=0.0, ge=0)


StageTarget = Target


class ApiConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1_024, le=64 * 1_048_576)


class GatewayConfig(_Section):
    profile: str = "claude"


class BoardConfig(_Section):
    """One board's webhook settings; the board-specific keys are optional."""

    tenant: str = Field(default="default", pattern=r"^[a-z0-9][a-z0-9_-]*$")
    # A key the board's payload carries (org login, organization id, project key, board id;
    # the generic body's `tenant`) -> the tenant it belongs to. A claim, checked against the
    # tenant whose secret signed the delivery, never trusted on its own.
    tenants: dict[str, str] = Field(default_factory=dict)
    # Tenant -> the environment variable holding that tenant's webhook secret for this board.
    # The board's own variable (e.g. CARDLOOP_GENERIC_WEBHOOK_SECRET) is `tenant`'s secret.
    secrets: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,99}$")],
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
    prompt_overrides: str = "~/.config/cardloop/prompts"


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
    kubeconfig: str = ""
    context: str = ""
    tail_lines: int = Field(default=300, ge=1)
    since_seconds: int = Field(default=86_400, ge=1)
    excerpt_tokens: int = Field(default=3_000, ge=200)
    timeout: float = Field(default=15.0, gt=0)
    services: dict[str, K8sServiceConfig] = Field(default_factory=dict)


class RepositorySourceConfig(_Section):
    cache_dir: str = "~/.cache/cardloop/repos"
    clone_url: str = "https://github.com/{repo}.git"
    token_env: str = "CARDLOOP_GITHUB_TOKEN"
    depth: int = Field(default=50, ge=1)
    adr_globs: list[str] = Field(default_factory=lambda: ["docs/adr/**/*.md", "doc/architecture/decisions/**/*.md"])
    doc_globs: list[str] = Field(default_factory=list)
    max_files: int = Field(default=8, ge=0, le=100)
    max_file_tokens: int = Field(default=2_500, ge=100)
    max_adrs: int = Field(default=3, ge=0, le=50)


class SourcesConfig(_Section):
    github: GitHubSourceConfig = GitHubSourceConfig()
    kubernetes: KubernetesSourceConfig = KubernetesSourceConfig()
    repository: RepositorySourceConfig = RepositorySourceConfig()


TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}\Z")  # as a card's `tenant`
# "owner/name", each part of GitHub's name characters plus fnmatch's * and ? (no [...] classes).
REPO_PATTERN = re.compile(r"^[A-Za-z0-9_.*?-]+/[A-Za-z0-9_.*?-]+\Z")


class TenantConfig(_Section):
    """What one tenant's cards may read from GitHub, and with which token
    (cardloop.integrations.access)."""

    # The environment variable holding this tenant's GitHub token, used by the github_* sources
    # and by git (repository source). Empty: the service's credentials ([sources.github],
    # [sources.repository]), still only for the repositories below.
    github_token_env: str = Field(default="", pattern=r"^(?:[A-Za-z_][A-Za-z0-9_]{0,199})?$")
    # "owner/name" patterns, case-insensitive, `*` and `?` within one part ("acme/*"); a card
    # naming any other repository gets none of its context. Empty: no repository at all.
    repos: list[str] = Field(default_factory=list)


# The workspace tools (cardloop.integrations.workspace.tools names the same set; a test ties them).
ToolName = Literal["read_file", "write_file", "edit_file", "list_files", "search", "run_command", "git_diff",
                   "git_status", "finish", "block"]
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


class WorkspaceConfig(_Section):
    # true: stages act in a git worktree of the card's repository with the tools below (cards
    # without a repository stay text only); false: every stage's turns are text.
    enabled: bool = False
    root: str = "~/.local/share/cardloop/workspaces"
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
    max_size_mb: int = Field(default=20_000, ge=1)
    max_age_hours: float = Field(default=168.0, gt=0)
    result_max_chars: int = Field(default=20_000, ge=1_000)
    test_timeout_seconds: float = Field(default=900.0, gt=0)
    # "owner/name" = "command": the repository's test command; unlisted repositories are detected.
    test_commands: dict[str, str] = Field(default_factory=dict)
    sandbox: SandboxConfig = SandboxConfig()
    tools: dict[Stage, list[ToolName]] = Field(default_factory=lambda: {
        Stage.PLANNING: list(_READ_TOOLS), Stage.REVIEW: list(_READ_TOOLS),
        **{s: [*_READ_TOOLS[:3], "write_file", "edit_file", "run_command", *_READ_TOOLS[3:]]
           for s in (Stage.CODING, Stage.TESTING, Stage.ERROR_FIXING)}})

    def tools_for(self, stage: Stage) -> list[str]:
        return list(self.tools.get(stage, []))


class ProviderConfig(_Section):
    format: str
    default_system_prompt: str = "You are a helpful assistant."


class ModelConfig(_Section):
    context_window: int = Field(gt=0)
    calibration: float = Field(default=1.0, ge=1.0, le=3.0)
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


class Config(_Section):
    api: ApiConfig = ApiConfig()
    gateway: GatewayConfig = GatewayConfig()
    boards: dict[str, BoardConfig] = Field(default_factory=dict)
    temporal: TemporalConfig = TemporalConfig()
    worker: WorkerConfig = WorkerConfig()
    codec_server: CodecServerConfig = CodecServerConfig()
    store: StoreConfig = StoreConfig()
    dev: DevConfig = DevConfig()
    summarizer: SummarizerConfig = SummarizerConfig()
    paths: PathsConfig = PathsConfig()
    tokens: TokensConfig = TokensConfig()
    budget: BudgetConfig = BudgetConfig()
    history: HistoryConfig = HistoryConfig()
    context: ContextConfig = ContextConfig()
    sources: SourcesConfig = SourcesConfig()
    # None (no [tenants] table): one trust domain, the service's credentials read any repository
    # a card names. A table, even an empty one: only the tenants listed, each only its `repos`.
    tenants: dict[str, TenantConfig] | None = None
    workspace: WorkspaceConfig = WorkspaceConfig()
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    stages: dict[str, StageConfig] = Field(default_factory=dict)
    retry: RetryConfig = RetryConfig()

    # Where the values came from, for messages; not part of the file's schema.
    source: str = Field(default="config.toml", exclude=True)
    env: Mapping[str, str] = Field(default_factory=dict, exclude=True, repr=False)

    def stage(self, stage: Stage) -> StageConfig:
        return self.stages[stage.value]

    def stages_enum(self) -> list[Stage]:
        return [Stage(name) for name in STAGE_NAMES if name in self.stages]

    def default_profile(self) -> str:
        if Stage.CODING.value in self.stages:
            return self.stages[Stage.CODING.value].profile
        return next(iter(self.profiles))

    def budget_for(self, stage: Stage | None, profile: str | None = None) -> TokenBudget:
        """Defaults, then the model's overrides, then the stage's."""
        values = self.budget.model_dump()
        prof = self.profiles[profile or self._stage_profile(stage)]
        layers = [self.models[prof.model].budget]
        if stage is not None and stage.value in self.stages:
            layers.append(self.stages[stage.value].budget)
        for layer in layers:
            values.update({k: v for k, v in layer.model_dump().items() if v is not None})
        return TokenBudget(**values)

    def _stage_profile(self, stage: Stage | None) -> str:
        if stage is not None and stage.value in self.stages:
            return self.stages[stage.value].profile
        return self.default_profile()

    def assembly_settings(self, stage: Stage | None, profile: str | None = None) -> AssemblySettings:
        name = profile or self._stage_profile(stage)
        if name not in self.profiles:
            raise ConfigError(f"unknown profile {name!r}; configured: {', '.join(self.profiles)}")
        prof = self.profiles[name]
        provider = self.providers[prof.provider]
        stage_cfg = self.stages.get(stage.value) if stage is not None else None
        model = self.models[prof.model]
        return AssemblySettings(
            budget=self.budget_for(stage, name),
            history=HistorySettings(**self.history.model_dump()),
            context=self.context_settings(),
            profile=name,
            provider=prof.provider,
            format=resolve_format(provider.format),
            model=prof.model,
            max_tokens=(stage_cfg.max_tokens if stage_cfg and stage_cfg.max_tokens else prof.max_tokens),
            temperature=(stage_cfg.temperature if stage_cfg and stage_cfg.temperature is not None
                         else prof.temperature),
            max_iterations=stage_cfg.max_iterations if stage_cfg else 8,
            profile_prompt=PromptSource(prof.system_prompt, f"config profiles.{name}.system_prompt")
            if prof.system_prompt else None,
            provider_default=PromptSource(provider.default_system_prompt,
                                          f"config providers.{prof.provider}.default_system_prompt"),
            calibration=model.calibration,
        )

    def context_settings(self) -> ContextSettings:
        defaults = ContextSettings()
        priorities = {**defaults.priorities, **self.context.priorities}
        kind_stages = {**defaults.kind_stages,
                       **{k: tuple(v) for k, v in self.context.stages.items()}}
        return ContextSettings(priorities=priorities, kind_stages=kind_stages,
                               max_item_tokens=self.context.max_item_tokens,
                               min_item_tokens=self.context.min_item_tokens,
                               card_max_tokens=self.context.card_max_tokens)

    def template_store(self) -> TemplateStore:
        return TemplateStore([Path(self.paths.prompt_overrides).expanduser()])

    def token_counter(self) -> TokenCounter:
        return TokenCounter(self.tokens.encoding)

    def sources_for(self, stage: Stage) -> list[str]:
        return list(self.context.sources.get(stage, []))

    def board(self, name: str) -> BoardConfig:
        return self.boards.get(name) or BoardConfig()

    def secret(self, env_name: str) -> Secret | None:
        return secret_from_env(self.env, env_name)

    def store_url(self) -> str:
        """DATABASE_URL wins (it may carry a password, so it never lives in config.toml)."""
        url = self.env.get("DATABASE_URL") or self.store.url
        if url.startswith("sqlite:///~"):
            url = "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).expanduser())
        return url

    def temporal_api_key(self) -> Secret | None:
        env_name = self.temporal.api_key_env
        return secret_from_env(self.env, env_name) if env_name else None

    def price(self, model: str) -> PriceConfig:
        cfg = self.models.get(model)
        return cfg.price if cfg else PriceConfig()

    def api_key(self, profile: str) -> Secret | None:
        env_name = self.profiles[profile].api_key_env
        return secret_from_env(self.env, env_name) if env_name else None


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _key_match(existing: Mapping[str, Any], wanted: str) -> str:
    """The existing key that `wanted` (from an env var name) addresses, else `wanted`."""
    norm = wanted.lower().replace("-", "_")
    for key in existing:
        if key.lower().replace("-", "_") == norm:
            return key
    return wanted.lower()


def apply_env_overrides(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Apply CARDLOOP_A__B=value overrides in place; returns dotted key -> env var name."""
    origins: dict[str, str] = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p for p in name[len(ENV_PREFIX):].split("__")]
        if not all(parts):
            raise ConfigError(f"{name}: malformed override name (use CARDLOOP_SECTION__KEY)")
        node: dict[str, Any] = data
        path: list[str] = []
        for part in parts[:-1]:
            key = _key_match(node, part)
            path.append(key)
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{name}: {'.'.join(path)} is a value, not a table")
            node = child
        key = _key_match(node, parts[-1])
        path.append(key)
        node[key] = _parse_env_value(env[name])
        origins[".".join(path)] = name
    return origins


def _format_validation(exc: ValidationError, source: str, origins: Mapping[str, str]) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        where = f" (from {origins[loc]})" if loc in origins else ""
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"  {loc}{where}: {msg}")
    return f"{source}: invalid configuration:\n" + "\n".join(lines)


def find_config_file(env: Mapping[str, str], explicit: str | Path | None = None) -> Path:
    if explicit:
        path = Path(explicit)
    elif env.get(ENV_CONFIG_FILE):
        path = Path(env[ENV_CONFIG_FILE])
    elif Path("config.toml").is_file():
        path = Path("config.toml")
    else:
        path = REPO_CONFIG
    if not path.is_file():
        raise ConfigError(f"configuration file not found: {path}")
    return path


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read, override from the environment, validate. Raises ConfigError naming the key."""
    env = dict(os.environ if env is None else env)
    file = find_config_file(env, path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    if env.get("CARDLOOP_API_PORT"):  # the documented short form of CARDLOOP_API__PORT
        env.setdefault("CARDLOOP_API__PORT", env["CARDLOOP_API_PORT"])
    origins = apply_env_overrides(data, env)
    try:
        config = Config.model_validate({**data, "source": str(file), "env": env})
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, str(file), origins)) from None
    problems = check_config(config)
    if problems:
        raise ConfigError(f"{file}: invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))
    return config


def check_config(config: Config) -> list[str]:
    """Cross-key rules, one message per problem, each naming its key."""
    problems: list[str] = []
    try:
        TokenCounter(config.tokens.encoding)
    except TokenizerError as exc:
        problems.append(f"tokens.encoding: {exc}")
    for name, prov in config.providers.items():
        try:
            resolve_format(prov.format)
        except ValueError as exc:
            problems.append(f"providers.{name}.format: {exc}")
    for name, prof in config.profiles.items():
        if prof.provider not in config.providers:
            problems.append(f"profiles.{name}.provider: unknown provider {prof.provider!r} "
                            f"(configured: {', '.join(config.providers) or 'none'})")
        if prof.model not in config.models:
            problems.append(f"profiles.{name}.model: no [models.{prof.model!r}] table "
                            "(context_window, calibration)")
    for stage_name, stage_cfg in config.stages.items():
        if stage_name not in STAGE_NAMES:
            problems.append(f"stages.{stage_name}: unknown stage (expected one of: {', '.join(STAGE_NAMES)})")
            continue
        if stage_cfg.profile not in config.profiles:
            problems.append(f"stages.{stage_name}.profile: unknown profile {stage_cfg.profile!r} "
                            f"(configured: {', '.join(config.profiles) or 'none'})")
    if config.gateway.profile not in config.profiles:
        problems.append(f"gateway.profile: unknown profile {config.gateway.profile!r} "
                        f"(configured: {', '.join(config.profiles) or 'none'})")
    if config.summarizer.profile not in config.profiles:
        problems.append(f"summarizer.profile: unknown profile {config.summarizer.profile!r} "
                        f"(configured: {', '.join(config.profiles) or 'none'})")
    for stage_key, tools in config.workspace.tools.items():
        writes = sorted(set(tools) & WRITE_TOOLS)
        if stage_key.value in READ_ONLY_STAGES and writes:
            problems.append(f"workspace.tools.{stage_key.value}: {stage_key.value} is read only; "
                            f"remove {', '.join(writes)}")
    for repo, command in config.workspace.test_commands.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
            problems.append(f"workspace.test_commands.{repo}: not an owner/name repository")
        if not command.strip():
            problems.append(f"workspace.test_commands.{repo}: empty command")
    problems += _tenant_problems(config)
    missing = [s for s in STAGE_NAMES if s not in config.stages]
    if missing:
        problems.append(f"stages: missing [stages.{missing[0]}]" +
                        (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    if problems:
        return problems
    problems += [f"budget.{p}" for p in TokenBudget(**config.budget.model_dump()).problems()]
    for model_name, model in config.models.items():
        key = f"models.{model_name}.budget"
        merged = {**config.budget.model_dump(),
                  **{k: v for k, v in model.budget.model_dump().items() if v is not None}}
        problems += [f"{key}: {p}" for p in TokenBudget(**merged).problems()]
    for stage in Stage:
        stage_cfg = config.stage(stage)
        prof = config.profiles[stage_cfg.profile]
        model = config.models[prof.model]
        budget = config.budget_for(stage)
        key = f"stages.{stage.value}"
        problems += [f"{key}.budget: {p}" for p in budget.problems()]
        max_tokens = stage_cfg.max_tokens or prof.max_tokens
        if budget.total > model.context_window - max_tokens:
            problems.append(
                f"{key}.budget.total: {budget.total:,} is larger than model {prof.model}'s context "
                f"window ({model.context_window:,}) minus max_tokens ({max_tokens:,})")
    return sorted(set(problems), key=problems.index)


def _tenant_problems(config: Config) -> list[str]:
    problems: list[str] = []
    owners: dict[str, str] = {}
    for tenant, cfg in (config.tenants or {}).items():
        key = f"tenants.{tenant}"
        if not TENANT_NAME.match(tenant):
            problems.append(f"{key}: not a tenant name (lower-case letters, digits, '-' and '_', "
                            "as a card's `tenant` is written)")
        for pattern in cfg.repos:
            if not REPO_PATTERN.match(pattern):
                problems.append(f"{key}.repos: {pattern!r} is not an \"owner/name\" pattern "
                                "(letters, digits, '_', '.', '-', and * or ? as wildcards within a part)")
        env_name = cfg.github_token_env
        if env_name and env_name in owners:
            problems.append(f"{key}.github_token_env: tenant {owners[env_name]!r} uses {env_name} too; "
                            "each tenant gets its own token (leave it empty for the service's)")
        if env_name:
            owners.setdefault(env_name, tenant)
    return problems

