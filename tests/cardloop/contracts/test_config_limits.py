"""[limits] and [tenants.<t>.limits] in config.toml: how they combine, and what a bad entry says
at start-up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.limits import Limits, limits_for
from tests.conftest import BUNDLED_CONFIG


def test_the_shipped_config_limits_nothing() -> None:
    limits = limits_for(load_config(REPO_CONFIG, env={}), "acme")
    assert not limits.active and limits.tenant == Limits() and limits.token == Limits()


def test_a_tenants_table_replaces_only_the_keys_it_sets(config_file: Callable[[str], Path]) -> None:
    path = config_file(BUNDLED_CONFIG + "\n[tenants.acme]\nrepos = []\n[tenants.acme.limits]\ntokens_per_day = 9000\n"
                                        "[tenants.acme.limits.per_token]\ncost_usd_per_month = 2.5\n"
                                        "[tenants.globex]\nrepos = []\n")
    config = load_config(path, env={"CARDLOOP_LIMITS__REQUESTS_PER_MINUTE": "60",
                                    "CARDLOOP_LIMITS__TOKENS_PER_DAY": "100000",
                                    "CARDLOOP_LIMITS__PER_TOKEN": "{ requests_per_minute = 10 }"})
    acme = limits_for(config, "acme")
    assert acme.tenant == Limits(requests_per_minute=60, tokens_per_day=9000)
    assert acme.token == Limits(requests_per_minute=10, cost_usd_per_month=2.5)
    globex = limits_for(config, "globex")
    assert globex.tenant == Limits(requests_per_minute=60, tokens_per_day=100000)
    assert globex.token == Limits(requests_per_minute=10)
    assert limits_for(config, "initech") == globex  # a tenant without a table gets the default


@pytest.mark.parametrize(("env", "message"), [
    ({"CARDLOOP_LIMITS__REQUESTS_PER_MINUTE": "-1"},
     r"limits\.requests_per_minute \(from CARDLOOP_LIMITS__REQUESTS_PER_MINUTE\): Input should be greater than or "
     r"equal to 0"),
    ({"CARDLOOP_LIMITS__COST_USD_PER_MONTH": '"ten"'},
     r"limits\.cost_usd_per_month .*: Input should be a valid number"),
    ({"CARDLOOP_LIMITS__COST_USD_PER_MONTH": "inf"}, r"limits\.cost_usd_per_month .*: Input should be a finite number"),
    ({"CARDLOOP_LIMITS__RPM": "5"}, r"limits\.rpm .*: unknown key"),
    ({"CARDLOOP_TENANTS__ACME__LIMITS__TOKENS_PER_DAY": "1.5"},
     r"tenants\.acme\.limits\.tokens_per_day .*: Input should be a valid integer"),
    ({"CARDLOOP_LIMITS__TOKENS_PER_DAY": "1000", "CARDLOOP_LIMITS__PER_TOKEN": "{ tokens_per_day = 5000 }"},
     r"limits\.per_token\.tokens_per_day \(from CARDLOOP_LIMITS__PER_TOKEN\): 5000 is above the tenant's own "
     r"tokens_per_day \(1000, from CARDLOOP_LIMITS__TOKENS_PER_DAY\), so it would never apply"),
    ({"CARDLOOP_TENANTS__ACME__LIMITS__REQUESTS_PER_MINUTE": "5",
      "CARDLOOP_LIMITS__PER_TOKEN": "{ requests_per_minute = 10 }"},
     r"tenants\.acme\.limits\.per_token\.requests_per_minute \(from CARDLOOP_LIMITS__PER_TOKEN\): 10 is above the "
     r"tenant's own requests_per_minute \(5, from CARDLOOP_TENANTS__ACME__LIMITS__REQUESTS_PER_MINUTE\)"),
    ({"CARDLOOP_LIMITS__PER_TOKEN": "{ rpm = 5 }"},
     r"limits\.per_token\.rpm \(from CARDLOOP_LIMITS__PER_TOKEN\): unknown key"),
])
def test_a_bad_limit_names_its_key(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(REPO_CONFIG, env=env)


def test_a_per_token_limit_inherited_from_the_file_names_the_key_it_came_from(
        config_file: Callable[[str], Path]) -> None:
    """The tenant's table does not set it: the message names where it is set, to be fixed there."""
    path = config_file(BUNDLED_CONFIG + "\n[limits.per_token]\nrequests_per_minute = 10\n[tenants.limrpm]\n"
                                        "repos = []\n[tenants.limrpm.limits]\nrequests_per_minute = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value).splitlines()[1:] == [
        "  tenants.limrpm.limits.per_token.requests_per_minute (from limits.per_token.requests_per_minute): 10 is "
        "above the tenant's own requests_per_minute (3), so it would never apply; lower it or set 0 "
        "(no per-token limit)"]
