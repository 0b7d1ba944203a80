"""check_models: every endpoint the stages and the summarizer use, asked once, and a refusal or an
unreachable endpoint said in one sentence with what to fix (the demo's and `cardloop dev`'s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cardloop.app.devserver import free_port
from cardloop.app.preflight import ModelUnusable, check_models, used_profiles
from cardloop.app.scripted_model import ScriptedModel
from cardloop.app.startup import load_config
from cardloop.contracts.config import REPO_CONFIG, Config

KEY = "sk-ant-accepted-key-42"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    server = ScriptedModel(api_key=KEY).start()
    yield server
    server.stop()


def config_for(key: str, base_url: str) -> Config:
    return load_config(REPO_CONFIG, env={"ANTHROPIC_API_KEY": key, "CARDLOOP_PROFILES__CLAUDE__BASE_URL": base_url,
                                         "CARDLOOP_PROFILES__CLAUDE_FAST__BASE_URL": base_url})


def test_one_request_per_endpoint_and_a_good_key_passes(model: ScriptedModel) -> None:
    config = config_for(KEY, model.url)
    said: list[str] = []
    check_models(config, say=said.append)
    assert set(used_profiles(config)) == {"claude", "claude-fast"}
    assert said == [f"checking the model: anthropic at {model.url} (profiles claude, claude-fast) …"]
    assert len(model.requests) == 1


def test_a_refused_key_names_the_profiles_and_the_variable(model: ScriptedModel) -> None:
    with pytest.raises(ModelUnusable) as caught:
        check_models(config_for("sk-ant-wrong", model.url))
    text = str(caught.value)
    assert text.startswith(f"the model cannot be used: anthropic at {model.url} (profiles claude, claude-fast): ")
    assert "HTTP 401: invalid x-api-key" in text and text.endswith("(the key was refused: check ANTHROPIC_API_KEY)")
    assert "sk-ant-wrong" not in text and caught.value.exit_code == 1


def test_an_override_url_wins_and_a_closed_port_says_what_to_check(model: ScriptedModel) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    config = config_for(KEY, closed)
    check_models(config, {"claude": model.url, "claude-fast": model.url})  # the demo's scripted model
    with pytest.raises(ModelUnusable) as caught:
        check_models(config)
    assert "Connection refused" in str(caught.value)
    assert str(caught.value).endswith("(no network, or a wrong base_url in [profiles.claude])")
