"""A context source read in part inside a stage run: GitHub Actions keeps the jobs it read when
one job's log keeps failing (502), and the run records what it went without, as `card show` and
`--follow` say it ("⚠ going on without github_actions (in part): ...")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cardloop.integrations.sources.fake_github import BRANCH, REPO, TOKEN, FakeGitHub, seed_ci, serving
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving() as fake:
        seed_ci(fake)
        yield fake


@pytest.fixture
def stack_overrides(github: FakeGitHub) -> dict[str, str]:
    return {"CARDLOOP_CONTEXT__SOURCES__ERROR_FIXING": '["github_actions"]',
            "CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE": "false", "CARDLOOP_GITHUB_TOKEN": TOKEN,
            "CARDLOOP_SOURCES__GITHUB__API_URL": f'"{github.api_url}"'}


async def test_a_source_read_in_part_is_said_by_the_run(stack: Stack, github: FakeGitHub) -> None:
    github.fail(r"/actions/jobs/2002/logs$", 502, "Server Error")
    ref = stack.cards.import_card(small_card("CTX-PART", repo=REPO, branch=BRANCH))
    await stack.cards.move(ref, "error_fixing", delivery_id="e2")
    state = await stack.wait_state(ref, lambda s: len(s.history) >= 1, timeout=200)
    run = state.history[0]
    assert run.outcome == "completed", run.reason
    partial = [u for u in run.unavailable if u.startswith("github_actions (in part): ")]
    assert partial and "2002" in partial[0], run.unavailable
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))
