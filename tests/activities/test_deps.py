"""ActivityDeps builds each profile's client once; a worker builds them ahead of the first call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cardloop.activities.deps import ActivityDeps
from cardloop.integrations.upstream import UpstreamError
from cardloop.store import Store
from tests.stack import make_config


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store.open("sqlite://")
    yield s
    s.close()


def test_warm_providers_builds_the_clients_the_first_calls_then_use(store: Store) -> None:
    rt = ActivityDeps.build(make_config("127.0.0.1:7233", "q"), store)
    rt.warm_providers()
    # The anthropic profiles have their key: built now, and the first call gets that very client.
    built = {name: rt._providers[name] for name in ("claude", "claude-fast")}
    assert all(rt.provider(name) is client for name, client in built.items())
    # Gemini has no key here: nothing built, nothing raised; its first call still says why.
    assert "gemini" not in rt._providers
    with pytest.raises(UpstreamError, match="no API key"):
        rt.provider("gemini")


def test_warm_providers_without_any_key_leaves_the_errors_to_the_calls(store: Store) -> None:
    rt = ActivityDeps.build(make_config("127.0.0.1:7233", "q", ANTHROPIC_API_KEY=""), store)
    rt.warm_providers()
    with pytest.raises(UpstreamError, match="ANTHROPIC_API_KEY"):
        rt.provider("claude")
