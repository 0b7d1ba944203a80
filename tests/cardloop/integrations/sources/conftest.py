"""Loopback GitHub and Kubernetes servers for the sources' tests (fake_github.py, fake_kubernetes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cardloop.integrations.sources.github import GitHubClient
from cardloop.integrations.sources.kubernetes import KubernetesSource
from cardloop.prompts.tokens import TokenCounter
from tests.cardloop.integrations.sources.fake_github import TOKEN as GITHUB_TOKEN
from tests.cardloop.integrations.sources.fake_github import FakeGitHub, serving
from tests.cardloop.integrations.sources.fake_kubernetes import PAYMENTS, TOKEN, FakeCluster, configuration


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serving() as github:
        yield github


@pytest.fixture
def client(fake: FakeGitHub) -> Iterator[GitHubClient]:
    c = GitHubClient(fake.api_url, token=GITHUB_TOKEN, timeout=5, request_interval=None)
    yield c
    c.close()


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster() as server:
        yield server


@pytest.fixture
def make_source(cluster: FakeCluster, counter: TokenCounter) -> Iterator[Any]:
    made: list[KubernetesSource] = []

    def make(services: dict[str, tuple[str, str]] = PAYMENTS, *, url: str | None = None, token: str = TOKEN,
             **options: Any) -> KubernetesSource:
        source = KubernetesSource(services, configuration(url or cluster.url, token), count=counter.count, **options)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()
