from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.integrations.workspace.manager import WorkspaceManager
from cardloop.prompts.card import Card
from tests.sample_remote import SAMPLE_REPO_NAME, Remote, push_sample_repo


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return push_sample_repo(tmp_path / "remotes", branches=("card/PAY-142-webhook-retries",))


@pytest.fixture
def manager(tmp_path: Path, remote: Remote) -> WorkspaceManager:
    return WorkspaceManager(tmp_path / "ws", clone_url_template=remote.url_template, depth=10)


def make_card(card_id: str = "PAY-142", branch: str | None = None, repo: str | None = SAMPLE_REPO_NAME) -> Card:
    return Card(id=card_id, tenant="acme", board="github-projects", title="Cap the retry delay",
                repo=repo, branch=branch)
