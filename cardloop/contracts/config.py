"""Loading config.toml plus environment overrides, validated once at start-up.

A wrong configuration fails here, before any work starts, with a message that names the
key: unknown keys, a section budget larger than the total, a total larger than the model's
context window minus max_tokens, unknown stage, profile, provider or model names.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from cardloop.contracts.config_sections import (  # noqa: F401  (re-exported: one import path for config)
    _READ_TOOLS,
    READ_ONLY_STAGES,
    REPO_PATTERN,
    TOOL_NAMES,
    WRITE_TOOLS,
    ApiConfig,
    BoardConfig,
    BudgetConfig,
    BudgetOverride,
    CodecServerConfig,
    ContextConfig,
    DevConfig,
    GatewayConfig,
    GitHubSourceConfig,
    HistoryConfig,
    K8sServiceConfig,
    KubernetesSourceConfig,
    LimitsConfig,
    ModelConfig,
    ObservabilityConfig,
    PathsConfig,
    PriceConfig,
    ProfileConfig,
    ProviderConfig,
    RepositorySourceConfig,
    ResearchConfig,
    SandboxConfig,
    SourcesConfig,
    StageConfig,
    StageTarget,
    StoreConfig,
    SummarizerConfig,
    TemporalConfig,
    TenantConfig,
    TenantPromptsConfig,
    TokenLimits,
    TokensConfig,
    ToolName,
    WorkerConfig,
    WorkspaceConfig,
    _Section,
)
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.payloads import ResearchSettings
from cardloop.contracts.retry import RetryConfig
from cardloop.contracts.secrets import Secret, secret_from_env
from cardloop.prompts.formats import resolve_format
from cardloop.prompts.settings import (
    AssemblySettings,
    ContextSettings,
    HistorySettings,
    PromptSource,
    TokenBudget,
)
from cardloop.prompts.stages import STAGE_NAMES, Stage
from cardloop.prompts.surrogates import undecodable
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tenant_id import is_tenant_id
from cardloop.prompts.tokens import TokenCounter, TokenizerError, check_encoding

ENV_PREFIX = "CARDLOOP_"
ENV_CONFIG_FILE = "CARDLOOP_CONFIG"
REPO_CONFIG = Path(__file__).resolve().parents[2] / "config.toml"


class Config(_Section):
    api: ApiConfig = ApiConfig()
    gateway: GatewayConfig = GatewayConfig()
    boards: dict[str, BoardConfig] = Field(default_factory=dict)
    temporal: TemporalConfig = TemporalConfig()
    worker: WorkerConfig = WorkerConfig()
    codec_server: CodecServerConfig = CodecServerConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    store: StoreConfig = StoreConfig()
    dev: DevConfig = DevConfig()
    summarizer: SummarizerConfig = SummarizerConfig()
    research: ResearchConfig = ResearchConfig()
    tenant_prompts: TenantPromptsConfig = TenantPromptsConfig()
    paths: PathsConfig = PathsConfig()
    tokens: TokensConfig = TokensConfig()
    budget: BudgetConfig = BudgetConfig()
    history: HistoryConfig = HistoryConfig()
    context: ContextConfig = ContextConfig()
    sources: SourcesConfig = SourcesConfig()
    # None (no [tenants] table): one trust domain, the service's credentials read any repository
    # a card names. A table, even an empty one: only the tenants listed, each only its `repos`.
    tenants: dict[str, TenantConfig] | None = None
    # Spend and abuse limits: every tenant's default ([tenants.<t>.limits] overrides per tenant).
    limits: LimitsConfig = LimitsConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    stages: dict[str, StageConfig] = Field(default_factory=dict)
    retry: RetryConfig = RetryConfig()

    @model_validator(mode="after")
    def _dev_stack_defaults(self) -> Config:
        """Where nothing else is configured, the store, Temporal and its UI are the dev stack's:
        a second stack in its own data dir and ports (`CARDLOOP_DEV__*`) is then a whole second
        stack, and the card commands run with the same settings reach it."""
        data_dir = self.dev.data_dir.rstrip("/") or "/"
        fills = {
            "store": {"url": f"sqlite:///{data_dir}/cardloop.sqlite"} if not self.store.url else {},
            "temporal": {**({"address": f"127.0.0.1:{self.dev.temporal_port}"} if not self.temporal.address else {}),
                         **({"ui_url": f"http://127.0.0.1:{self.dev.ui_port}"} if not self.temporal.ui_url else {})},
        }
        for section, update in fills.items():
            if update:  # the sections are frozen: replaced, not changed
                object.__setattr__(self, section, getattr(self, section).model_copy(update=update))
        return self

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
            min_cache_tokens=model.min_cache_tokens,
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
            try:
                url = "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).expanduser())
            except RuntimeError:  # '~nobody/...'
                where = "DATABASE_URL" if self.env.get("DATABASE_URL") else "store.url"
                user = url.removeprefix("sqlite:///~").split("/")[0]
                raise ConfigError(f"{where}: {url!r}: no user {user!r} on this machine") from None
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


def _origin(key: str, origins: Mapping[str, str]) -> str | None:
    """The variable that set `key`, itself or a table holding it (CARDLOOP_LIMITS__PER_TOKEN='{...}')."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        if (name := origins.get(".".join(parts[:end]))) is not None:
            return name
    return None


def _set_by(key: str, origins: Mapping[str, str]) -> str | None:
    """The variable that set `key`, a table holding it, or a key inside it
    (CARDLOOP_STAGES__CODNG__MAX_ITERATIONS set stages.codng)."""
    if (name := _origin(key, origins)) is not None:
        return name
    inside = sorted(name for k, name in origins.items() if k.startswith(key + "."))
    return inside[0] if inside else None


def unknown_stage(name: str, origins: Mapping[str, str]) -> str:
    """The message for a [stages.<name>] table (or CARDLOOP_STAGES__<NAME>__... variable) whose
    name is no stage: a typo there otherwise shows as a missing required key of a stage that
    does not exist."""
    where = f" (from {var})" if (var := _set_by(f"stages.{name}", origins)) else ""
    close = difflib.get_close_matches(name, STAGE_NAMES, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"stages.{name}{where}: unknown stage (expected one of: {', '.join(STAGE_NAMES)}){hint}"


def _format_validation(exc: ValidationError, source: str, origins: Mapping[str, str]) -> str:
    lines = []
    unknown_stages: set[str] = set()
    for err in exc.errors():
        if len(err["loc"]) >= 2 and err["loc"][0] == "stages" and str(err["loc"][1]) not in STAGE_NAMES:
            # One line for the unknown stage, not its table's missing or wrong keys.
            if str(err["loc"][1]) not in unknown_stages:
                unknown_stages.add(str(err["loc"][1]))
                lines.append(f"  {unknown_stage(str(err['loc'][1]), origins)}")
            continue
        loc = ".".join(str(p) for p in err["loc"])
        where = f" (from {name})" if (name := _origin(loc, origins)) else ""
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}{where}: {msg}")
    return f"{source}: invalid configuration:\n" + "\n".join(lines)


def find_config_file(env: Mapping[str, str], explicit: str | Path | None = None) -> Path:
    named = ""  # where the path came from, when the user did not type it on this command line
    if explicit:
        path = Path(explicit)
    elif env.get(ENV_CONFIG_FILE):
        path, named = Path(env[ENV_CONFIG_FILE]), f" (from {ENV_CONFIG_FILE})"
    elif Path("config.toml").is_file():
        path = Path("config.toml")
    else:
        path = REPO_CONFIG
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "not found" if not path.exists() else "is not a regular file"
        raise ConfigError(f"configuration file {what}: {path}{named}")
    return path


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read, override from the environment, validate. Raises ConfigError naming the key."""
    env = dict(os.environ if env is None else env)
    for name, value in env.items():  # our own variables, before any of them becomes a path or a URL
        if (name.startswith("CARDLOOP_") or name == "DATABASE_URL") and (problem := undecodable(name, value)):
            raise ConfigError(problem)
    file = find_config_file(env, path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8 text by definition
        raise ConfigError(f"{file}: not UTF-8 text: {exc}") from None
    except OSError as exc:  # no permission, a name too long ...
        raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}") from None
    aliases = {}
    if env.get("CARDLOOP_API_PORT") and "CARDLOOP_API__PORT" not in env:
        # The documented short form of CARDLOOP_API__PORT: messages name the one the user set.
        env["CARDLOOP_API__PORT"] = env["CARDLOOP_API_PORT"]
        aliases["CARDLOOP_API__PORT"] = "CARDLOOP_API_PORT"
    for short, key in RESEARCH_MODEL_ENV.items():
        # The short names for the research models; the long form wins when both are set.
        if env.get(short) and key not in env:
            env[key] = _toml_string(env[short])
            aliases[key] = short
    origins = {key: aliases.get(name, name) for key, name in apply_env_overrides(data, env).items()}
    try:
        config = Config.model_validate({**data, "source": str(file), "env": env})
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, str(file), origins)) from None
    problems = check_config(config, origins)
    if problems:
        raise ConfigError(f"{file}: invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))
    return config


def check_config(config: Config, origins: Mapping[str, str] | None = None) -> list[str]:
    """Cross-key rules, one message per problem, each naming its key (and, from `origins`, dotted
    key -> the CARDLOOP_... variable that set it, where a value came from the environment)."""
    problems: list[str] = []
    try:
        check_encoding(config.tokens.encoding)
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
            problems.append(unknown_stage(stage_name, origins or {}))
            continue
        if stage_cfg.profile not in config.profiles:
            problems.append(f"stages.{stage_name}.profile: unknown profile {stage_cfg.profile!r} "
                            f"(configured: {', '.join(config.profiles) or 'none'})")
    if config.gateway.profile not in config.profiles:
        problems.append(f"gateway.profile: unknown profile {config.gateway.profile!r} "
                        f"(configured: {', '.join(config.profiles) or 'none'})")
    problems += _research_problems(config)
    guard = config.tenant_prompts.guard_profile
    if guard and guard not in config.profiles:
        problems.append(f"tenant_prompts.guard_profile: unknown profile {guard!r} "
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
    problems += _tenant_problems(config, origins or {})
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


def _tenant_problems(config: Config, origins: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    owners: dict[str, str] = {}
    for tenant, cfg in (config.tenants or {}).items():
        key = f"tenants.{tenant}"
        if not is_tenant_id(tenant):
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
    problems += _limit_problems(config, origins)
    return problems


def _limit_problems(config: Config, origins: Mapping[str, str]) -> list[str]:
    """A per-token limit above its tenant's own never applies: a mistake, named by its key and,
    as every configuration error, by where each value came from (a variable, or [limits] that a
    tenant's table inherits)."""
    from cardloop.contracts.limits import LIMIT_NAMES, limits_for

    problems: list[str] = []
    tables = {"limits": None, **{f"tenants.{t}.limits": t for t, c in (config.tenants or {}).items() if c.limits}}
    for key, tenant in tables.items():
        effective = limits_for(config, tenant or "")
        for name in LIMIT_NAMES:
            whole, each = getattr(effective.tenant, name), getattr(effective.token, name)
            if whole and each > whole:
                each_key = f"{key}.per_token.{name}"
                each_from = _source(_limit_key(config, tenant, name, per_token=True), each_key, origins)
                whole_from = _source(_limit_key(config, tenant, name, per_token=False), f"{key}.{name}", origins)
                problems.append(f"{each_key}{f' (from {each_from})' if each_from else ''}: {each:g} is above the "
                                f"tenant's own {name} ({whole:g}{f', from {whole_from}' if whole_from else ''}), "
                                "so it would never apply; lower it or set 0 (no per-token limit)")
    return problems


def _limit_key(config: Config, tenant: str | None, name: str, *, per_token: bool) -> str:
    """The key whose value limits_for uses: the tenant's table when it sets `name`, else [limits]."""
    own = (config.tenants or {}).get(tenant) if tenant else None
    table: Any = own.limits if own is not None else None
    if per_token and table is not None:
        table = table.per_token
    path = ".per_token" if per_token else ""
    if table is not None and name in table.model_fields_set:
        return f"tenants.{tenant}.limits{path}.{name}"
    return f"limits{path}.{name}"


def _source(key: str, named: str, origins: Mapping[str, str]) -> str | None:
    """Where the value of `key` came from, for a message that names `named`: the variable that set
    it; else `key` itself when it is not the key named (inherited); else None (the file, as named)."""
    return _origin(key, origins) or (key if key != named else None)



# Short environment names for the research models (issue 14), next to the generic overrides.
RESEARCH_MODEL_ENV = {"CARDLOOP_ANALYST_MODEL": "CARDLOOP_RESEARCH__ANALYST_MODEL",
                      "CARDLOOP_SYNTHESIZER_MODEL": "CARDLOOP_RESEARCH__SYNTHESIZER_MODEL"}


def _toml_string(value: str) -> str:
    # Overrides are read as TOML literals: a bare model name must be quoted to stay a string.
    return value if value.startswith(('"', "'")) else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _research_problems(config: Config) -> list[str]:
    r = config.research
    problems = []
    for role in ("analyst", "synthesizer"):
        profile, model = getattr(r, f"{role}_profile"), getattr(r, f"{role}_model")
        if profile not in config.profiles:
            problems.append(f"research.{role}_profile: unknown profile {profile!r} "
                            f"(configured: {', '.join(config.profiles) or 'none'})")
        if model and model not in config.models:
            problems.append(f"research.{role}_model: no [models.{model!r}] table (context_window, calibration, "
                            f"price); known: {', '.join(config.models) or 'none'}")
    return problems


def research_models(config: Config, analyst: str | None = None, synthesizer: str | None = None) -> tuple[str, str]:
    """(analyst model, synthesizer model): a flag's value, else [research], else the profile's model."""
    r = config.research
    return (analyst or r.analyst_model or config.profiles[r.analyst_profile].model,
            synthesizer or r.synthesizer_model or config.profiles[r.synthesizer_profile].model)


def research_settings(config: Config, analyst: str | None = None, synthesizer: str | None = None) -> ResearchSettings:
    """[research] as a workflow input, the models resolved (flags win over config over profiles)."""
    r = config.research
    analyst_model, synthesizer_model = research_models(config, analyst, synthesizer)
    for role, model in (("analyst", analyst_model), ("synthesizer", synthesizer_model)):
        if model not in config.models:
            raise ConfigError(f"research {role} model {model!r}: no [models.{model!r}] table in {config.source} "
                              f"(known: {', '.join(config.models) or 'none'})")
    return ResearchSettings(
        analyst_profile=r.analyst_profile, analyst_model=analyst_model, synthesizer_profile=r.synthesizer_profile,
        synthesizer_model=synthesizer_model,
        **r.model_dump(exclude={"analyst_profile", "analyst_model", "synthesizer_profile", "synthesizer_model",
                                "stages", "auto_min_tokens", "index_cache_mb"}))
