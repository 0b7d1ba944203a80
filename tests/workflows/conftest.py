"""Fixtures of the workflow tests: the sample repository's bare remote and a loopback GitHub."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cardloop.integrations.sources.fake_github import FakeGitHub, serving
from tests.sample_remote import Remote, push_sample_repo


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return push_sample_repo(tmp_path / "remotes")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving() as fake:
        yield fake
