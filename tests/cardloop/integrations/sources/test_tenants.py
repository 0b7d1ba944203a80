"""[tenants]: each tenant's cards read only its own repositories, with its own GitHub token.

The sources are built as the worker builds them (registry.build_source from config.toml plus
environment overrides) and run against the loopback GitHub (fake_github.py, which accepts every
token below and records each request's headers), real git repositories over file://, and a
loopback git server that asks for credentials and records them."""

from __future__ import annotations

import base64
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cardloop.contracts.config import REPO_CONFIG, Config, load_config
from cardloop.integrations.access import AccessDenied
from cardloop.integrations.sources.base import Source, SourceRequest
from cardloop.integrations.sources.registry import TenantScopedSource, build_source
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card, ContextKind
from cardloop.prompts.stages import Stage
from tests.cardloop.integrations.sources.fake_github import BRANCH, REPO, FakeGitHub, card, req, seed_ci
from tests.repos import make_payments_repo

ACME_TOKEN = "ghp_AcmeTenantToken000000000000000000aaaa"
GLOBEX_TOKEN = "ghp_GlobexTenantToken0000000000000000bbbb"
SERVICE_TOKEN = "ghp_ServiceToken00000000000000000000cccc"
GLOBEX_REPO = "globex/ledger"

TENANTS = {
    "CARDLOOP_TENANTS__ACME__GITHUB_TOKEN_ENV": '"ACME_GITHUB_TOKEN"',
    "CARDLOOP_TENANTS__ACME__REPOS": '["acme/*"]',
    "CARDLOOP_TENANTS__GLOBEX__GITHUB_TOKEN_ENV": '"GLOBEX_GITHUB_TOKEN"',
    "CARDLOOP_TENANTS__GLOBEX__REPOS": f'["{GLOBEX_REPO}"]',
    "ACME_GITHUB_TOKEN": ACME_TOKEN,
    "GLOBEX_GITHUB_TOKEN": GLOBEX_TOKEN,
}


def make_config(tmp_path: Path, *, api_url: str = "http://127.0.0.1:9/api/v3",
                clone_url: str = "file:///nonexistent/{repo}", **env: str) -> Config:
    return load_config(REPO_CONFIG, env={
        "CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "no-overrides"),
        "CARDLOOP_GITHUB_TOKEN": SERVICE_TOKEN,
        "CARDLOOP_SOURCES__GITHUB__API_URL": f'"{api_url}"',
        "CARDLOOP_SOURCES__GITHUB__TIMEOUT": "5",
        "CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": f'"{clone_url}"',
        "CARDLOOP_SOURCES__REPOSITORY__CACHE_DIR": f'"{tmp_path / "cache"}"',
        **env,
    })


@pytest.fixture
def github(fake: FakeGitHub) -> FakeGitHub:
    """The fake GitHub with one repository per tenant, each with a failed CI run, and every
    token known, so which token a request carries is the only thing that differs."""
    fake.tokens = {ACME_TOKEN, GLOBEX_TOKEN, SERVICE_TOKEN}
    fake.repos[GLOBEX_REPO] = fake.repo_json(GLOBEX_REPO)
    seed_ci(fake)
    fake.runs[GLOBEX_REPO] = [fake.run_json(GLOBEX_REPO, 1001, name="CI", workflow_id=11)]
    return fake


def tokens_seen(fake: FakeGitHub) -> set[str]:
    return {s.headers.get("authorization", "") for s in fake.seen if s.server == "api"}


def gather(source: Source, c: Card) -> object:
    return source.gather(SourceRequest(c, Stage.ERROR_FIXING))


# --- GitHub sources ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["github_actions", "github_reviews", "github_tests"])
def test_a_card_naming_another_tenants_repository_is_refused_before_any_request(
        github: FakeGitHub, tmp_path: Path, name: str) -> None:
    config = make_config(tmp_path, api_url=github.api_url, **TENANTS)
    source = build_source(name, config)
    with pytest.raises(AccessDenied) as err:
        gather(source, card(tenant="acme", repo=GLOBEX_REPO))
    assert err.value.kind == "forbidden" and not err.value.retryable
    assert err.value.message == (f"tenant 'acme' may not read repository '{GLOBEX_REPO}' "
                                 "(not in [tenants.acme] repos); nothing was fetched")
    assert github.seen == []   # not one request, with any token
    for token in (ACME_TOKEN, GLOBEX_TOKEN, SERVICE_TOKEN):
        assert token not in str(err.value) and token not in repr(err.value) and token not in repr(source)


def test_a_pull_request_url_into_another_tenants_repository_is_refused(github: FakeGitHub, tmp_path: Path) -> None:
    # card.repo is acme's, but the GitHub sources would read the pull request the url names.
    source = build_source("github_reviews", make_config(tmp_path, api_url=github.api_url, **TENANTS))
    with pytest.raises(AccessDenied, match=f"may not read repository '{GLOBEX_REPO}'"):
        gather(source, card(tenant="acme", url=f"https://github.com/{GLOBEX_REPO}/pull/7"))
    with pytest.raises(AccessDenied, match=f"may not read repository '{GLOBEX_REPO}'"):
        gather(source, card(tenant="acme", id=f"{GLOBEX_REPO}#7", repo=None))
    assert github.seen == []


def test_each_tenant_reads_its_own_repository_with_its_own_token(github: FakeGitHub, tmp_path: Path) -> None:
    source = build_source("github_actions", make_config(tmp_path, api_url=github.api_url, **TENANTS))
    assert isinstance(source, TenantScopedSource)

    acme = gather(source, card(tenant="acme", repo=REPO))
    assert any(i.kind is ContextKind.BUILD_LOG for i in acme.items)  # type: ignore[attr-defined]
    assert tokens_seen(github) == {f"token {ACME_TOKEN}"}

    github.seen.clear()
    globex = gather(source, card(tenant="globex", repo=GLOBEX_REPO))
    assert globex.items  # type: ignore[attr-defined]
    # The cached acme client was not handed to globex: only globex's token, never acme's.
    assert tokens_seen(github) == {f"token {GLOBEX_TOKEN}"}

    github.seen.clear()
    gather(source, card(tenant="acme", repo=REPO))  # acme again: its own cached client
    assert tokens_seen(github) == {f"token {ACME_TOKEN}"}
    # The storage host (signed log URLs) gets no token at all.
    assert all("authorization" not in s.headers for s in github.seen if s.server == "storage")
    source.close()  # type: ignore[attr-defined]


def test_a_tenant_not_listed_reads_nothing(github: FakeGitHub, tmp_path: Path) -> None:
    source = build_source("github_actions", make_config(tmp_path, api_url=github.api_url, **TENANTS))
    with pytest.raises(AccessDenied) as err:
        gather(source, card(tenant="initech", repo=REPO))
    assert err.value.message == ("tenant 'initech' has no [tenants.initech] section in the configuration, "
                                 "so its cards may read no repository")
    assert "acme" not in err.value.message and "globex" not in err.value.message  # no other tenant named
    with pytest.raises(AccessDenied):  # a card without a repository: still not this tenant's service
        gather(source, card(tenant="initech", repo=None, branch=None))
    assert github.seen == []


def test_an_empty_tenants_table_refuses_every_tenant(github: FakeGitHub, tmp_path: Path, config_file) -> None:
    path = config_file(REPO_CONFIG.read_text() + "\n[tenants]\n")
    config = load_config(path, env={"CARDLOOP_GITHUB_TOKEN": SERVICE_TOKEN,
                                    "CARDLOOP_SOURCES__GITHUB__API_URL": f'"{github.api_url}"'})
    assert config.tenants == {}
    with pytest.raises(AccessDenied):
        gather(build_source("github_actions", config), card(tenant="default", repo=REPO))
    assert github.seen == []


def test_a_tenants_missing_token_is_not_replaced_by_the_service_token(github: FakeGitHub, tmp_path: Path) -> None:
    env = {k: v for k, v in TENANTS.items() if k != "ACME_GITHUB_TOKEN"}
    source = build_source("github_actions", make_config(tmp_path, api_url=github.api_url, **env))
    with pytest.raises(UpstreamError) as err:
        gather(source, card(tenant="acme", repo=REPO))
    assert err.value.kind == "not_configured" and not err.value.retryable
    assert "tenant 'acme'" in err.value.message and "ACME_GITHUB_TOKEN" in err.value.message
    assert github.seen == []


def test_a_tenant_without_its_own_token_uses_the_service_token_for_its_repositories_only(
        github: FakeGitHub, tmp_path: Path) -> None:
    env = {"CARDLOOP_TENANTS__ACME__REPOS": '["acme/payments-*"]'}
    source = build_source("github_actions", make_config(tmp_path, api_url=github.api_url, **env))
    gather(source, card(tenant="acme", repo=REPO))
    assert tokens_seen(github) == {f"token {SERVICE_TOKEN}"}
    github.seen.clear()
    with pytest.raises(AccessDenied):
        gather(source, card(tenant="acme", repo="acme/billing"))  # not on the list: pattern, not owner
    with pytest.raises(AccessDenied):
        gather(source, card(tenant="acme", repo=GLOBEX_REPO))
    assert github.seen == []


def test_without_a_tenants_table_the_service_token_reads_any_repository(github: FakeGitHub, tmp_path: Path) -> None:
    config = make_config(tmp_path, api_url=github.api_url)
    assert config.tenants is None
    source = build_source("github_actions", config)
    assert not isinstance(source, TenantScopedSource)  # exactly the source it always was
    for tenant, repo in (("acme", REPO), ("globex", GLOBEX_REPO), ("acme", GLOBEX_REPO)):
        assert gather(source, card(tenant=tenant, repo=repo)).items  # type: ignore[attr-defined]
    assert tokens_seen(github) == {f"token {SERVICE_TOKEN}"}


# --- repository source (git) ------------------------------------------------------------------


def make_globex_repo(root: Path) -> Path:
    repo = root / GLOBEX_REPO
    repo.mkdir(parents=True)
    (repo / "ledger.py").write_text("SECRET_RATE = 0.42  # globex's own code\n")
    git = ["git", "-c", "user.email=dev@globex.test", "-c", "user.name=dev", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "ledger"], check=True)
    return repo


def checkouts(cache: Path) -> list[str]:
    """Every checkout under the cache, as <path relative to the cache>."""
    return sorted(str(p.parent.relative_to(cache)) for p in cache.rglob(".git")) if cache.exists() else []


def test_repository_source_clones_only_the_tenants_repositories_into_its_own_folder(tmp_path: Path) -> None:
    remotes = tmp_path / "remotes"
    make_payments_repo(remotes)
    make_globex_repo(remotes)
    config = make_config(tmp_path, clone_url=f"file://{remotes}/{{repo}}", **TENANTS)
    source = build_source("repository", config)
    cache = tmp_path / "cache"

    with pytest.raises(AccessDenied, match=f"tenant 'acme' may not read repository '{GLOBEX_REPO}'"):
        gather(source, Card(id="PAY-1", tenant="acme", title="Read the ledger", repo=GLOBEX_REPO))
    assert checkouts(cache) == []   # no clone happened

    acme = gather(source, Card(id="PAY-1", tenant="acme", title="Fix the retry helper", repo=REPO,
                               branch="card/PAY-1"))
    assert any(i.kind is ContextKind.SOURCE_FILE for i in acme.items)  # type: ignore[attr-defined]
    globex = gather(source, Card(id="GL-1", tenant="globex", title="Ledger rate", repo=GLOBEX_REPO))
    assert any("SECRET_RATE" in i.content for i in globex.items)  # type: ignore[attr-defined]
    # Each tenant's clones live apart: no checkout fetched for one is read for the other.
    assert checkouts(cache) == [f".tenants/acme/{REPO}", f".tenants/globex/{GLOBEX_REPO}"]


class _GitAuthServer(ThreadingHTTPServer):
    seen: list[tuple[str, str]]   # (path, credentials)


class _GitAuthHandler(BaseHTTPRequestHandler):
    server: _GitAuthServer

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        if auth is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
        else:
            scheme, _, value = auth.partition(" ")
            self.server.seen.append((self.path, base64.b64decode(value).decode() if scheme == "Basic" else auth))
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def git_server() -> Iterator[_GitAuthServer]:
    server = _GitAuthServer(("127.0.0.1", 0), _GitAuthHandler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_git_is_given_the_cards_tenants_token(tmp_path: Path, git_server: _GitAuthServer) -> None:
    port = git_server.server_address[1]
    config = make_config(tmp_path, clone_url=f"http://127.0.0.1:{port}/{{repo}}.git", **TENANTS)
    source = build_source("repository", config)

    with pytest.raises(UpstreamError) as err:   # the server answers 404 once it has the credentials
        gather(source, Card(id="PAY-1", tenant="acme", title="t", repo=REPO))
    assert not isinstance(err.value, AccessDenied)
    assert {cred for _, cred in git_server.seen} == {f"x-access-token:{ACME_TOKEN}"}

    git_server.seen.clear()
    with pytest.raises(UpstreamError):
        gather(source, Card(id="GL-1", tenant="globex", title="t", repo=GLOBEX_REPO))
    assert {cred for _, cred in git_server.seen} == {f"x-access-token:{GLOBEX_TOKEN}"}

    git_server.seen.clear()
    with pytest.raises(AccessDenied):
        gather(source, Card(id="PAY-2", tenant="acme", title="t", repo=GLOBEX_REPO))
    assert git_server.seen == []   # refused before git ran: the server never heard of it
    assert ACME_TOKEN not in str(err.value)


def test_kubernetes_pod_logs_follow_the_allow_list_too(tmp_path: Path) -> None:
    # No cluster is needed: the refusal comes before the source is even built.
    source = build_source("kubernetes", make_config(tmp_path, **TENANTS))
    with pytest.raises(AccessDenied, match=f"may not read repository '{GLOBEX_REPO}'"):
        source.gather(req(card(tenant="acme", repo=GLOBEX_REPO, branch=BRANCH)))
