"""`cardloop context CARD --stage STAGE` on a card file, with a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cardloop.app.cli.inproc import run_cli
from tests.cardloop.integrations.sources.fake_github import BRANCH, REPO, TOKEN, seed_ci, serving
from tests.conftest import ROOT

CLI = Path(sys.executable).parent / "cardloop"


def test_context_shows_each_source_its_tokens_and_what_the_budget_kept(tmp_path: Path,
                                                                      repository_env: dict[str, str]) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"id": "CTX-2", "title": "Cap the retry delay", "repo": "acme/payments-api",
                                "branch": "card/PAY-1", "body": "See app/webhooks/retry.py"}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_GITHUB")},
           "HOME": str(tmp_path), **repository_env}
    out = run_cli(["context", str(card), "--stage", "error_fixing", "--source", "repository",
                   "--source", "github_actions"], env=env)
    assert out.returncode == 0, out.stderr
    assert "[ok] repository" in out.stdout
    assert "app/webhooks/retry.py" in out.stdout
    assert "[unavailable] github_actions: no GitHub credentials" in out.stdout
    assert "what the context budget kept" in out.stdout
    data = json.loads(run_cli(["context", str(card), "--stage", "planning", "--json"], env=env).stdout)
    assert data["sources"][0]["source"] == "repository" and data["sources"][0]["status"] == "ok"
    assert data["context_tokens"] <= data["context_budget"]


def github_context(tmp_path: Path, api_url: str, *extra: str, repo: str = REPO,
                   script: bool = False) -> subprocess.CompletedProcess[str]:
    """`cardloop context` over the github_actions source alone, against the loopback GitHub: in
    this process (inproc.py says why), or with SCRIPT as the installed script in a process of its own."""
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"id": "CTX-3", "title": "Fix the failing build", "repo": repo, "branch": BRANCH}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_")}, "HOME": str(tmp_path),
           "CARDLOOP_GITHUB_TOKEN": TOKEN, "CARDLOOP_SOURCES__GITHUB__API_URL": api_url}
    args = ["context", str(card), "--stage", "error_fixing", "--source", "github_actions", *extra]
    if not script:
        return run_cli(args, env=env)
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def test_one_jobs_log_failing_is_a_partial_source_not_an_unavailable_one(tmp_path: Path) -> None:
    with serving() as fake:
        seed_ci(fake)
        fake.fail(r"/actions/jobs/2002/logs$", 502, "Server Error")
        out = github_context(tmp_path, fake.api_url)
        data = json.loads(github_context(tmp_path, fake.api_url, "--json").stdout)
    assert out.returncode == 0, out.stderr
    assert "[partial] github_actions: not read: job 2002 (test (3.11)): log not read: GitHub failed while " \
           "downloading the log of job 2002" in out.stdout
    assert "kept whole in the store: github_actions/2003.log" in out.stdout
    assert "kept whole in the store: github_actions/2004.log" in out.stdout
    [source] = data["sources"]
    assert source["status"] == "partial" and len(source["items"]) == 3 and len(source["missing"]) == 1


def test_a_rate_limit_is_unavailable_without_claiming_a_retry(tmp_path: Path) -> None:
    """`cardloop context` runs a source once: the reason names GitHub's wait, never "retrying"."""
    with serving() as fake:
        seed_ci(fake)
        fake.fail(r"/actions/runs$", 429, "You have exceeded a secondary rate limit.", {"retry-after": "3"})
        out = github_context(tmp_path, fake.api_url)
    assert out.returncode == 0, out.stderr
    [line] = [x for x in out.stdout.splitlines() if x.startswith("[unavailable] github_actions")]
    assert "rate limit reached while listing failed workflow runs" in line and "GitHub asks to wait 3 s" in line
    assert "retrying" not in out.stdout


def test_pygithubs_redirect_lines_stay_out_of_the_output(tmp_path: Path) -> None:
    """A renamed repository answers 301 and PyGithub follows it, logging "Following Github server
    redirection from ..." at info through a stderr handler of its own: not on a user's terminal.
    A process of its own: that handler holds the stderr of the process that imported PyGithub, which
    in this one is not the stream an in-process run captures."""
    with serving() as fake:
        seed_ci(fake)
        fake.repos["acme/old-name"] = fake.repos[REPO]
        fake.fail(r"^/api/v3/repos/acme/old-name$", 301, "Moved Permanently",
                  {"Location": f"{fake.api_url}/repos/{REPO}"})
        out = github_context(tmp_path, fake.api_url, repo="acme/old-name", script=True)
        redirected = fake.requests_to(r"^/api/v3/repos/acme/old-name$")
    assert out.returncode == 0, out.stderr
    assert redirected and "[ok] github_actions" in out.stdout  # followed: the renamed repository's runs
    assert "redirection" not in out.stdout + out.stderr
