"""What the coding agent's workflow tests share: the agent transcript and the config that turns
the workspace on against the sample repository's bare remote (and a loopback GitHub)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cardloop.integrations.sources.fake_github import TOKEN, FakeGitHub
from tests.sample_remote import Remote
from tests.stack import ROOT

AGENT = json.loads((ROOT / "examples" / "agent-transcript.json").read_text(encoding="utf-8"))


def agent_env(remote: Remote, root: Path, github: FakeGitHub | None = None, **extra: str) -> dict[str, str]:
    """Config overrides: the workspace on under `root`, clones from `remote`, and with `github`
    its API and token (pass CARDLOOP_GITHUB_TOKEN="" in `extra` for none)."""
    env = {"CARDLOOP_WORKSPACE__ENABLED": "true", "CARDLOOP_WORKSPACE__ROOT": str(root / "workspaces"),
           "CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": remote.url_template,
           "CARDLOOP_SOURCES__REPOSITORY__CACHE_DIR": str(root / "repos")}
    if github is not None:
        env |= {"CARDLOOP_SOURCES__GITHUB__API_URL": github.api_url, "CARDLOOP_GITHUB_TOKEN": TOKEN}
    return env | extra
