"""`cardloop doctor` as a user runs it: real checks of the store, Temporal's port, git and the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardloop.app.cli.main import main
from cardloop.app.devserver import free_port


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CARDLOOP_STORE__URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setenv("CARDLOOP_TEMPORAL__ADDRESS", f"127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("CARDLOOP_WORKSPACE__ROOT", str(tmp_path / "ws"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return tmp_path


def checks(capsys: pytest.CaptureFixture[str]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for c in json.loads(capsys.readouterr().out):
        found.setdefault(c["name"], []).append(c)
    return found


def test_a_laptop_without_temporal_or_keys_gets_warnings_not_failures(env: Path, capsys) -> None:
    assert main(["doctor", "--json"]) == 0
    found = checks(capsys)
    assert found["config"][0]["status"] == "ok" and found["store"][0]["status"] == "ok"
    assert (env / "store.sqlite").is_file()
    assert found["temporal"][0]["status"] == "warn" and "does not answer" in found["temporal"][0]["detail"]
    assert found["model claude"][0]["status"] == "warn" and "ANTHROPIC_API_KEY" in found["model claude"][0]["detail"]
    assert found["git"][0]["status"] == "ok" and found["workspace root"][0]["status"] == "ok"
    sandbox = " | ".join(c["detail"] for c in found["sandbox"])
    assert "the whole process group killed" in sandbox and ("network" in sandbox) and "PID namespace" in sandbox


def test_an_unreachable_store_fails_with_exit_1(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARDLOOP_STORE__URL", f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "✗ store" in out and "✓ config" in out


def test_an_unwritable_workspace_root_fails(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = env / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CARDLOOP_WORKSPACE__ROOT", str(blocker / "ws"))
    assert main(["doctor", "--json"]) == 1
    assert checks(capsys)["workspace root"][0]["status"] == "fail"


def test_each_board_says_whether_it_gets_results_back(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARDLOOP_LINEAR_API_KEY", "lin_api_" + "k" * 40)
    monkeypatch.delenv("CARDLOOP_TRELLO_TOKEN", raising=False)
    monkeypatch.setenv("CARDLOOP_JIRA_API_TOKEN", "bot@acme.example:token")
    monkeypatch.setenv("CARDLOOP_BOARDS__JIRA__API_URL", '""')
    assert main(["doctor", "--json"]) == 0
    found = checks(capsys)
    assert found["board linear"][0] == {"name": "board linear", "status": "ok",
                                        "detail": "writes back with CARDLOOP_LINEAR_API_KEY"}
    trello = found["board trello"][0]
    assert trello["status"] == "warn" and "CARDLOOP_TRELLO_TOKEN is not set" in trello["detail"]
    assert "boards.jira.api_url is empty" in found["board jira"][0]["detail"]
    assert "lin_api_" not in json.dumps(found)


def test_temporal_namespace_and_search_attributes_are_checked_on_a_real_server(
        env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from cardloop.app.devserver import TemporalDevServer

    with TemporalDevServer(port=free_port(), ui_port=None, retention=None) as server:
        monkeypatch.setenv("CARDLOOP_TEMPORAL__ADDRESS", server.address)
        main(["doctor", "--json"])
        ok = checks(capsys)["temporal"][0]
        assert ok["status"] == "ok" and "search attributes" in ok["detail"]
        monkeypatch.setenv("CARDLOOP_TEMPORAL__NAMESPACE", "nowhere")
        assert main(["doctor", "--json"]) == 1
        missing = checks(capsys)["temporal"][0]
        assert missing["status"] == "fail"
        assert "nowhere: the namespace does not exist" in missing["detail"]
        assert "cardloop temporal-setup" in missing["detail"]


def test_the_codec_keys_are_checked_never_printed(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from cardloop.app.codec import KeyRing

    keys = KeyRing.generate("prod-2026").to_text()
    monkeypatch.setenv("CARDLOOP_CODEC_KEYS", keys)
    main(["doctor", "--json"])
    out = capsys.readouterr().out
    codec = next(c for c in json.loads(out) if c["name"] == "codec")
    assert codec["status"] == "ok" and "prod-2026" in codec["detail"] and keys.split(":", 1)[1] not in out
    monkeypatch.setenv("CARDLOOP_CODEC_KEYS", "prod:not-base64!")
    assert main(["doctor", "--json"]) == 1
    assert checks(capsys)["codec"][0]["status"] == "fail"
    monkeypatch.setenv("CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS", "false")
    main(["doctor", "--json"])
    assert checks(capsys)["codec"][0]["status"] == "warn"
