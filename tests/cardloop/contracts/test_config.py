from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.secrets import Secret
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import load_encoding
from tests.conftest import BUNDLED_CONFIG


def test_bundled_config_loads_and_builds_settings_for_every_stage() -> None:
    config = load_config(REPO_CONFIG, env={})
    for stage in Stage:
        s = config.assembly_settings(stage)
        # Coding keeps a longer history (its tool turns), so its prompt cache is rewritten rarely.
        assert (s.budget.history, s.budget.total) == ((40_000, 62_000) if stage is Stage.CODING else (10_000, 27_500))
        assert s.calibration == 1.3 and s.min_cache_tokens == 1024
    assert config.assembly_settings(Stage.REVIEW).temperature == 0.0
    assert config.stage(Stage.CODING).max_iterations == 12


def test_unknown_key_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace("[budget]\n", "[budget]\nsystme = 5\n"))
    with pytest.raises(ConfigError, match=r"budget\.systme: unknown key"):
        load_config(path, env={})


def test_section_budget_larger_than_total_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace("history = 10000", "history = 30000"))
    with pytest.raises(ConfigError, match=r"budget\.history \(30,000\) is larger than total \(27,500\)"):
        load_config(path, env={})


def test_total_larger_than_window_minus_max_tokens_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace('context_window = 32768', 'context_window = 20000')
                 .replace('[stages.testing]\nprofile = "claude"', '[stages.testing]\nprofile = "local"'))
    with pytest.raises(ConfigError, match=r"stages\.testing\.budget\.total: 27,500 is larger than model "
                                          r"qwen2\.5-coder-32b-instruct's context window \(20,000\) minus "
                                          r"max_tokens \(4,096\)"):
        load_config(path, env={})


def test_unknown_stage_name_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG + '\n[stages.deploying]\nprofile = "claude"\n')
    with pytest.raises(ConfigError, match=r"stages\.deploying: unknown stage"):
        load_config(path, env={})


def test_unknown_profile_name_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace('[stages.review]\nprofile = "claude"',
                                              '[stages.review]\nprofile = "gpt"'))
    with pytest.raises(ConfigError, match=r"stages\.review\.profile: unknown profile 'gpt'"):
        load_config(path, env={})


def test_unknown_context_kind_in_priorities_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace("adr = 50", "adrs = 50"))
    with pytest.raises(ConfigError, match=r"context\.priorities\.adrs"):
        load_config(path, env={})


def test_stage_budget_override_is_checked_against_the_total(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace("[stages.error_fixing.budget]\ncontext = 15000",
                                        "[stages.error_fixing.budget]\ncontext = 40000"))
    with pytest.raises(ConfigError, match=r"stages\.error_fixing\.budget: context \(40,000\) is larger"):
        load_config(path, env={})


def test_environment_overrides_with_double_underscores() -> None:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_BUDGET__TOTAL": "30000",
                                           "CARDLOOP_STAGES__CODING__MAX_ITERATIONS": "3",
                                           "CARDLOOP_PROFILES__CLAUDE_FAST__TEMPERATURE": "0.5"})
    assert config.budget.total == 30_000
    assert config.stage(Stage.CODING).max_iterations == 3
    assert config.profiles["claude-fast"].temperature == 0.5


def test_bad_environment_override_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"budget\.totl \(from CARDLOOP_BUDGET__TOTL\): unknown key"):
        load_config(REPO_CONFIG, env={"CARDLOOP_BUDGET__TOTL": "1"})
    with pytest.raises(ConfigError, match=r"CARDLOOP_BUDGET__TOTAL"):
        load_config(REPO_CONFIG, env={"CARDLOOP_BUDGET__TOTAL": "lots"})


def test_secrets_come_from_the_environment_and_never_print() -> None:
    config = load_config(REPO_CONFIG, env={"ANTHROPIC_API_KEY": "sk-ant-api03-verysecretvalue"})
    key = config.api_key("claude")
    assert isinstance(key, Secret)
    assert key.reveal() == "sk-ant-api03-verysecretvalue"
    assert "verysecret" not in repr(key) + str(key) + f"{key}" + repr(config)
    assert config.api_key("local") is None


def test_not_toml_and_missing_file_are_clear(config_file: Callable[[str], Path]) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(config_file("[budget\n"), env={})
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(config_file("").parent / "nope.toml", env={})


def test_board_secrets_name_a_tenant_and_an_environment_variable() -> None:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__GENERIC__SECRETS": '{ acme = "ACME_SECRET" }'})
    assert config.board("generic").secrets == {"acme": "ACME_SECRET"}
    with pytest.raises(ConfigError, match=r"boards\.generic\.secrets"):
        load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__GENERIC__SECRETS": '{ "Acme Corp" = "ACME_SECRET" }'})
    with pytest.raises(ConfigError, match=r"boards\.generic\.secrets"):
        load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__GENERIC__SECRETS": '{ acme = "not a variable" }'})


def test_an_encoding_without_a_bundled_vocabulary_is_named(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG.replace('encoding = "cl100k_base"', 'encoding = "o200k_base"'))
    with pytest.raises(ConfigError, match=r"tokens\.encoding: token encoding 'o200k_base' has no bundled vocabulary"):
        load_config(path, env={})
    path = config_file(BUNDLED_CONFIG.replace('encoding = "cl100k_base"', 'encoding = "cl100k"'))
    with pytest.raises(ConfigError, match=r"tokens\.encoding: unknown token encoding 'cl100k'"):
        load_config(path, env={})


def test_checking_the_config_does_not_load_the_vocabulary() -> None:
    """Every CLI command checks the config; reading cl100k's vocabulary costs about 0.4 s, which
    only the commands that count tokens pay (bench/cli_startup.py)."""
    load_encoding.cache_clear()
    load_config(REPO_CONFIG, env={})
    assert load_encoding.cache_info().currsize == 0


def test_store_temporal_and_its_ui_follow_the_dev_stack_unless_set() -> None:
    # One data dir and its ports make one whole stack: a second `cardloop dev` in its own
    # directory does not share the first one's store, and the card commands find its Temporal.
    dev = {"CARDLOOP_DEV__DATA_DIR": "/srv/second", "CARDLOOP_DEV__TEMPORAL_PORT": "17233",
           "CARDLOOP_DEV__UI_PORT": "18233"}
    config = load_config(env=dev)
    assert config.store_url() == "sqlite:////srv/second/cardloop.sqlite"
    assert (config.temporal.address, config.temporal.ui_url) == ("127.0.0.1:17233", "http://127.0.0.1:18233")
    default = load_config(env={})
    assert default.store.url == "sqlite:///~/.local/share/cardloop/cardloop.sqlite"
    assert (default.temporal.address, default.temporal.ui_url) == ("127.0.0.1:7233", "http://127.0.0.1:8233")
    # Whatever is set wins: a cluster, its UI, a database.
    chosen = load_config(env={**dev, "CARDLOOP_TEMPORAL__ADDRESS": '"temporal.prod:7233"',
                              "CARDLOOP_TEMPORAL__UI_URL": '"https://ui.prod"', "CARDLOOP_STORE__URL": '"sqlite:////db"',
                              "DATABASE_URL": "postgresql://cardloop@db/cardloop"})
    assert (chosen.temporal.address, chosen.temporal.ui_url) == ("temporal.prod:7233", "https://ui.prod")
    assert chosen.store.url == "sqlite:////db" and chosen.store_url() == "postgresql://cardloop@db/cardloop"



def test_an_unknown_stage_set_from_the_environment_names_the_stage_and_the_variable() -> None:
    # Only max_iterations: without a fix the table lacked `profile` ("stages.codng.profile: Field required").
    with pytest.raises(ConfigError) as info:
        load_config(REPO_CONFIG, env={"CARDLOOP_STAGES__CODNG__MAX_ITERATIONS": "3",
                                      "CARDLOOP_STAGES__CODNG__X": "1"})
    lines = str(info.value).splitlines()[1:]
    assert lines == ["  stages.codng (from CARDLOOP_STAGES__CODNG__MAX_ITERATIONS): unknown stage (expected one of: "
                     "planning, coding, review, testing, error_fixing); did you mean 'coding'?"]
    # A complete table (it validates) is caught by the cross-key check, naming the variable too.
    with pytest.raises(ConfigError, match=r"stages\.reveiw \(from CARDLOOP_STAGES__REVEIW__PROFILE\): unknown stage "
                                          r"\(expected one of: planning, .*\); did you mean 'review'\?"):
        load_config(REPO_CONFIG, env={"CARDLOOP_STAGES__REVEIW__PROFILE": "claude"})
    # A stage known but misspelt in one of its keys still says "unknown key" for that key.
    with pytest.raises(ConfigError, match=r"stages\.coding\.max_iteratons "
                                          r"\(from CARDLOOP_STAGES__CODING__MAX_ITERATONS\): unknown key"):
        load_config(REPO_CONFIG, env={"CARDLOOP_STAGES__CODING__MAX_ITERATONS": "3"})


def test_a_cache_price_left_out_is_the_input_price(config_file: Callable[[str], Path]) -> None:
    """OpenAI and Gemini report cached prompt tokens whether asked or not: with a price of only
    input and output, those tokens were free in the ledger and under the spend caps."""
    from cardloop.integrations.providers import Price, Usage, cost_usd

    path = config_file(BUNDLED_CONFIG + '\n[models."gpt-4.1"]\ncontext_window = 1047576\n'
                                        'price = { input = 2.0, output = 8.0 }\n')
    config = load_config(path, env={})
    p = config.price("gpt-4.1")
    assert (p.cache_read, p.cache_write) == (2.0, 2.0)
    usage = Usage(input_tokens=1_000, output_tokens=100, cache_read_tokens=9_000)
    assert cost_usd(usage, Price(p.input, p.output, p.cache_read, p.cache_write)) == pytest.approx(0.0208)
    sonnet = config.price("claude-sonnet-4-6")  # set ones stay as set
    assert (sonnet.cache_read, sonnet.cache_write) == (0.30, 3.75)
    assert config.price("not-configured").cache_read == 0.0
