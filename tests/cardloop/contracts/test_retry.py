"""[retry]: which schedule a failed model call follows, when it stops, and what it says."""

from __future__ import annotations

import pytest

from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.retry import RetryConfig, decide, parse_seconds, words

CFG = RetryConfig()  # the defaults: unreachable 2 s doubling to 30 s, 8 attempts; overload 5 s to 60 s for 15 min


def test_unreachable_model_follows_the_short_schedule_and_says_so() -> None:
    delays = [decide("connection", n, 0.0, CFG).delay for n in range(1, 8)]
    assert delays == [2, 4, 8, 16, 30, 30, 30]
    third = decide("connection", 3, 14.0, CFG, detail="anthropic: connection failed: refused")
    assert third.message == ("retrying: cannot reach the model (attempt 3 of 8, next in 8 s): "
                             "anthropic: connection failed: refused")
    last = decide("connection", 8, 120.0, CFG)
    assert last.delay is None and last.message.startswith("gave up: cannot reach the model (attempt 8 of 8)")
    assert decide("timeout", 2, 0.0, CFG).message.startswith("retrying: the model did not answer in time")


def test_overload_retries_for_minutes_until_the_deadline() -> None:
    # 150 s of 529s (the outage that failed every stage under the old eight attempts) is survived.
    at_150s = decide("overloaded", 9, 150.0, CFG)
    assert at_150s.delay == 60
    assert "retrying: the model is overloaded (attempt 9, for 2 min 30 s so far" in at_150s.message
    assert "gives up after 15 min" in at_150s.message
    assert [decide("server", n, 0.0, CFG).delay for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 60]
    late = decide("overloaded", 20, 880.0, CFG, detail="anthropic: HTTP 529: Overloaded")
    assert late.delay is None
    assert late.message == ("gave up: the model is overloaded for 14 min 40 s (attempt 20; [retry] overload_deadline "
                            "is 15 min): anthropic: HTTP 529: Overloaded")


def test_a_providers_retry_after_wins_over_the_backoff_but_not_over_the_deadline() -> None:
    assert decide("rate_limited", 1, 0.0, CFG, retry_after=42.0).delay == 42.0
    assert decide("rate_limited", 1, 0.0, CFG, retry_after=0.5).delay == 0.5
    past = decide("rate_limited", 3, 600.0, CFG, retry_after=400.0, detail="openai: HTTP 429: slow down")
    assert past.delay is None
    # It said "reached for 10 min": the reason is the provider's wait, which the message names.
    assert past.message == ("gave up: the model's rate limit is reached and the provider asks to wait 6 min 40 s, "
                            "past [retry] overload_deadline of 15 min (attempt 3, failing for 10 min): "
                            "openai: HTTP 429: slow down")
    assert decide("connection", 1, 0.0, CFG, retry_after=9.0).delay == 9.0


def test_a_zero_deadline_gives_up_at_the_first_failure() -> None:
    cfg = RetryConfig(overload_deadline=0)
    assert decide("overloaded", 1, 0.0, cfg).delay is None


def test_durations_read_as_words_and_numbers() -> None:
    assert [parse_seconds(v) for v in ("90s", "10m", "1h30m", "250ms", "12", "", "off")] == \
        [90, 600, 5400, 0.25, 12, 0, 0]
    assert words(59.6) == "1 min" and words(3725) == "1 h 2 min" and words(16) == "16 s"
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds("ten minutes")


def test_retry_settings_come_from_config_toml_and_the_environment() -> None:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_RETRY__OVERLOAD_DEADLINE": "30m",
                                           "CARDLOOP_STAGES__CODING__AUTO_RETRY_AFTER": "10m"})
    assert config.retry.overload_deadline == 1800 and config.retry.unreachable_attempts == 8
    assert config.stages["coding"].auto_retry_after == 600 and config.stages["review"].auto_retry_after is None
    with pytest.raises(ConfigError, match=r"retry\.auto_retries"):
        load_config(REPO_CONFIG, env={"CARDLOOP_RETRY__AUTO_RETRIES": "-1"})
    with pytest.raises(ConfigError, match=r"retry\.overload_deadline.*not a duration"):
        load_config(REPO_CONFIG, env={"CARDLOOP_RETRY__OVERLOAD_DEADLINE": "soon"})
