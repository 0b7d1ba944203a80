"""`cardloop doctor` as a user runs it: real checks of the store, Temporal's port, git and the sandbox."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cardloop.app.cli.main import main
from cardloop.app.devserver import free_port
from tests.cardloop.integrations.sources.fake_kubernetes import CRASHING, FakeCluster, add_crashloop
from tests.cardloop.integrations.sources.fake_kubernetes import TOKEN as K8S_TOKEN


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CARDLOOP_STORE__URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    # The dev stack's Temporal (temporal.address follows dev.temporal_port), not started: nothing listens.
    monkeypatch.setenv("CARDLOOP_DEV__TEMPORAL_PORT", str(free_port()))
    monkeypatch.delenv("CARDLOOP_TEMPORAL__ADDRESS", raising=False)
    monkeypatch.setenv("CARDLOOP_WORKSPACE__ROOT", str(tmp_path / "ws"))
    monkeypatch.setenv("CARDLOOP_SOURCES__GITHUB__API_URL", f"http://127.0.0.1:{free_port()}")  # nothing there
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CARDLOOP_GITHUB_TOKEN", raising=False)
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


def test_a_configured_temporal_that_does_not_answer_fails_with_exit_1(env: Path, capsys,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A cluster or Temporal Cloud named in the configuration is not a laptop's dev stack: its
    # silence is a failure, and `cardloop dev` is no advice for it.
    monkeypatch.setenv("CARDLOOP_TEMPORAL__ADDRESS", f"127.0.0.2:{free_port()}")
    assert main(["doctor", "--json"]) == 1
    [temporal] = checks(capsys)["temporal"]
    assert temporal["status"] == "fail" and "does not answer" in temporal["detail"]
    assert "cardloop dev" not in temporal["detail"]


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


def test_the_store_check_says_whether_blobs_are_encrypted_at_rest(env: Path, capsys,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from cardloop.contracts.keyring import KeyRing

    monkeypatch.delenv("CARDLOOP_CODEC_KEYS", raising=False)
    main(["doctor", "--json"])
    assert "blobs in plain text (CARDLOOP_CODEC_KEYS is not set)" in checks(capsys)["store"][0]["detail"]
    keys = KeyRing.generate("prod-2026").to_text()
    monkeypatch.setenv("CARDLOOP_CODEC_KEYS", keys)
    main(["doctor", "--json"])
    out = capsys.readouterr().out
    store = next(c for c in json.loads(out) if c["name"] == "store")
    assert store["status"] == "ok" and "blobs encrypted at rest (AES-GCM, key ids prod-2026" in store["detail"]
    assert keys.split(":", 1)[1] not in out
    monkeypatch.setenv("CARDLOOP_STORE__ENCRYPT_BLOBS", "false")
    main(["doctor", "--json"])
    assert "blobs in plain text (store.encrypt_blobs = false)" in checks(capsys)["store"][0]["detail"]


class _GitHub(BaseHTTPRequestHandler):
    """GitHub's GET /rate_limit: 200 with the core resource for the right token, else 401."""

    def do_GET(self) -> None:
        ok = self.path == "/rate_limit" and self.headers.get("Authorization") in (None, f"Bearer {GH_TOKEN}")
        body = ({"resources": {"core": {"limit": 5000, "remaining": 4990, "reset": 1, "used": 10}}} if ok
                else {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        data = json.dumps(body).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


GH_TOKEN = "ghp_DoctorToken000000000000000000000000"


def test_github_access_is_checked_with_the_token(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("CARDLOOP_SOURCES__GITHUB__API_URL", f"http://127.0.0.1:{server.server_address[1]}")
        main(["doctor", "--json"])
        assert checks(capsys)["github"][0]["status"] == "warn"  # no token: public repositories only
        monkeypatch.setenv("CARDLOOP_GITHUB_TOKEN", GH_TOKEN)
        main(["doctor", "--json"])
        out = capsys.readouterr().out
        github = next(c for c in json.loads(out) if c["name"] == "github")
        assert github["status"] == "ok" and "4990 requests left" in github["detail"] and GH_TOKEN not in out
        monkeypatch.setenv("CARDLOOP_GITHUB_TOKEN", "ghp_Revoked0000000000000000000000000000")
        assert main(["doctor", "--json"]) == 1
        assert checks(capsys)["github"][0]["status"] == "fail"
    finally:
        server.shutdown()
        server.server_close()


def test_kubernetes_access_is_checked_per_service(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    main(["doctor", "--json"])
    assert checks(capsys)["kubernetes"][0]["status"] == "warn"  # no kubeconfig, not in a pod
    with FakeCluster() as cluster:
        kubeconfig = env / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "fake", "cluster": {"server": cluster.url}}],
            "users": [{"name": "worker", "user": {"token": K8S_TOKEN}}],
            "contexts": [{"name": "test", "context": {"cluster": "fake", "user": "worker"}}]}))
        monkeypatch.setenv("CARDLOOP_SOURCES__KUBERNETES__KUBECONFIG", str(kubeconfig))
        main(["doctor", "--json"])
        ok = checks(capsys)["kubernetes"][0]
        assert ok["status"] == "ok", ok
        cluster.fail(r"/api/v1/namespaces/payments/pods", 403, {
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": 'pods is forbidden: User "system:serviceaccount:cardloop:worker" cannot list resource'})
        main(["doctor", "--json"])
        found = checks(capsys)["kubernetes"][0]
        assert found["status"] == "warn" and "answered 403" in found["detail"]
        assert "needs 'list' on 'pods'" in found["detail"]


def forbidden(resource: str) -> dict[str, object]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": f'{resource} is forbidden: User "system:serviceaccount:cardloop:worker" cannot '
                       f'{"get" if resource == "pods/log" else "list"} resource "{resource}"'}


def test_kubernetes_checks_pods_log_and_events_too(env: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pods listable but `pods/log` and `events` refused: the source would read no log and no
    event, so doctor says so, naming each verb and resource to grant, instead of a ✓."""
    with FakeCluster() as cluster:
        add_crashloop(cluster)
        kubeconfig = env / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "fake", "cluster": {"server": cluster.url}}],
            "users": [{"name": "worker", "user": {"token": K8S_TOKEN}}],
            "contexts": [{"name": "test", "context": {"cluster": "fake", "user": "worker"}}]}))
        monkeypatch.setenv("CARDLOOP_SOURCES__KUBERNETES__KUBECONFIG", str(kubeconfig))
        assert main(["doctor", "--json"]) == 0
        ok = checks(capsys)["kubernetes"][0]
        assert ok["status"] == "ok" and "pods, pods/log and events" in ok["detail"], ok
        assert any(r.path.endswith(f"/pods/{CRASHING}/log") for r in cluster.requests)

        cluster.fail(r"/log$", 403, forbidden("pods/log"))
        cluster.fail(r"/events$", 403, forbidden("events"))
        main(["doctor", "--json"])
        found = checks(capsys)["kubernetes"][0]
        assert found["status"] == "warn", found
        assert "listing events in payments answered 403 Forbidden: the worker needs 'list' on 'events'" \
            in found["detail"]
        assert (f"reading the log of pod {CRASHING} in payments answered 403 Forbidden: the worker needs 'get' "
                "on 'pods/log'") in found["detail"]
        main(["doctor"])
        assert "✓ kubernetes" not in capsys.readouterr().out
