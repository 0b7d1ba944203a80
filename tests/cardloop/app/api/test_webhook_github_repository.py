"""A GitHub repository renamed or moved to another owner takes its cards with it, through the real
app, Temporal, store and a loopback fake of GitHub's write API: GitHub's `repository` delivery
(`renamed`: changes.repository.name.from; `transferred`: changes.owner.from) names the cards of
the old repository under the new name, so a failed CI run naming only the new name (a run
carries no node id) reaches its pull request's card at once, and the stage it starts comments on
the pull request under the new name. A repository delivery acts on the cards of the tenant whose
secret signed it, never another tenant's; a body naming another tenant is refused (403); bad
payloads are 400 naming what is wrong; other repository actions are ignored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cardloop.contracts.payloads import CardRef, CardState
from tests.cardloop.app.api.test_webhook_board_ids import one, workflow_ids
from tests.cardloop.app.api.webhook_kit import ENV, Clock, at, hub_signature, webhook_client
from tests.cardloop.app.boards.conftest import fixture_json
from tests.cardloop.app.boards.github_payloads import repository_event
from tests.cardloop.integrations.board_clients.fake_boards import Board, board_env, serving
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(240)

NEW, OLD = "acme/payments-api", "acme/payments-old"   # the fake board knows the pull request as NEW#142
ACME_GITHUB = "acme-github-secret-0123"


@pytest.fixture
def github_board() -> Iterator[Board]:
    with serving("github") as board:
        yield board


@pytest.fixture
def stack_overrides(github_board: Board) -> dict[str, str]:
    return board_env("github", github_board)


def failed_run(repo: str, number: int) -> dict[str, Any]:
    """GitHub's recorded workflow_run example, failed, its pull request `repo`#`number`."""
    run = json.loads(json.dumps(fixture_json("github/workflow_run.completed.json")).replace(
        "Codertocat/Hello-World", repo))
    run["workflow_run"]["conclusion"] = "failure"
    run["workflow_run"]["pull_requests"][0]["number"] = number
    return run


async def post(api: httpx.AsyncClient, kind: str, data: dict[str, Any], delivery: str,
               secret: str | None = None) -> httpx.Response:
    body = json.dumps(data).encode()
    return await api.post("/webhooks/github", content=body, headers={
        "content-type": "application/json", "x-github-event": kind, "x-github-delivery": delivery,
        "x-hub-signature-256": hub_signature(body, *([secret] if secret else []))})


async def send(api: httpx.AsyncClient, kind: str, data: dict[str, Any], delivery: str,
               secret: str | None = None) -> dict[str, Any]:
    r = await post(api, kind, data, delivery, secret)
    assert r.status_code == 200, r.text
    return one(r.json())


def told(s: CardState) -> bool:
    return s.board_told >= s.stage_runs and any(r.stage == "error_fixing" for r in s.history)


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE="false")
async def test_a_failed_run_after_a_repository_rename_reaches_its_card_and_writes_go_to_the_new_name(
        stack: Stack, github_board: Board) -> None:
    ref = stack.cards.import_card(small_card(f"{OLD}#142", tenant="default", repo=OLD, branch="card/pay-142",
                                             url=f"https://github.com/{OLD}/pull/142"))
    assert ref.key == "default/github/acme:payments-old#142"
    stack.store.remember_board_ids(ref.key, uid="PR_kwDOpay142")
    clock = Clock(at("2020-10-05T16:33:49Z") + 1)   # just after the run's updated_at
    async with webhook_client(stack, clock=clock) as api:
        unknown = await send(api, "workflow_run", failed_run(NEW, 142), "gh-run-1")
        assert (unknown["status"], unknown["reason"]) == ("ignored", f"no card is known for {NEW}#142"), unknown

        # The repository renamed: its cards are named under the new name at once.
        renamed = await send(api, "repository", repository_event("renamed", OLD, NEW), "gh-repo-1")
        assert (renamed["kind"], renamed["status"], renamed["cards"], renamed["was"], renamed["repository"]) == (
            "repository", "accepted", [ref.key], OLD, NEW), renamed
        assert stack.store.board_name(ref.key) == f"{NEW}#142"
        card = stack.store.card_fields(ref.key)
        assert card is not None and (card.repo, card.url) == (NEW, f"https://github.com/{NEW}/pull/142")
        again = await send(api, "repository", repository_event("renamed", OLD, NEW), "gh-repo-1-again")
        assert again["status"] == "duplicate", again

        # GitHub redelivers the failed run: it reaches the card, whose stage comments under the new name.
        failed = await send(api, "workflow_run", failed_run(NEW, 142), "gh-run-1-again")
        assert (failed["card"], failed["board_card"], failed["status"], failed["stage"]) == (
            ref.key, f"{NEW}#142", "accepted", "error_fixing"), failed
    state = await stack.cards.wait_for(ref, told, timeout=90)
    assert "refused" not in state.board and f"{NEW}#142" in state.board, state.board
    firsts = [c.splitlines()[0] for c in github_board.comments]
    assert "cardloop · error_fixing (run 1) started: the agent is working on this card." in firsts, firsts
    assert not any("payments-api" in wf for wf in await workflow_ids(stack))   # only the first key's workflows


@pytest.mark.stack_env(**ENV, CARDLOOP_BOARDS__GITHUB__SECRETS='{ acme = "ACME_GITHUB_SECRET" }',
                       ACME_GITHUB_SECRET=ACME_GITHUB, CARDLOOP_BOARDS__GITHUB__TENANTS='{ globex = "acme" }')
async def test_a_repository_delivery_moves_the_cards_of_its_own_tenant_only(stack: Stack) -> None:
    ours = CardRef.for_board("default", "github", f"{OLD}#142").key
    theirs = CardRef.for_board("acme", "github", f"{OLD}#142").key
    for key in (ours, theirs):
        tenant = key.split("/")[0]
        stack.cards.import_card(small_card(f"{OLD}#142", tenant=tenant, repo=OLD))
    async with webhook_client(stack, clock=Clock(0)) as api:
        # Tenant acme's webhook: its card follows the repository, default's does not.
        moved = await send(api, "repository", repository_event("transferred", OLD, "globex/payments-old"),
                           "gh-acme-1", secret=ACME_GITHUB)
        assert (moved["status"], moved["cards"]) == ("accepted", [theirs]), moved
        assert stack.store.board_name(theirs) == "globex/payments-old#142"
        assert stack.store.board_name(ours) == f"{OLD}#142"
        card = stack.store.card_fields(ours)
        assert card is not None and card.repo == OLD
        # The same move signed by default's secret names org globex, which is acme's: refused, nothing moved.
        r = await post(api, "repository", repository_event("transferred", OLD, "globex/payments-old"), "gh-def-1")
        assert r.status_code == 403 and "acme" in r.text, r.text
        assert stack.store.board_name(ours) == f"{OLD}#142"
        assert stack.store.card_for_board_ids("default", "github", name="globex:payments-old#142").by_name is None
        # Default's own rename finds its own card only.
        ok = await send(api, "repository", repository_event("renamed", OLD, NEW), "gh-def-2")
        assert (ok["status"], ok["cards"]) == ("accepted", [ours]), ok
        assert stack.store.board_name(theirs) == "globex/payments-old#142"
        # A repository no card is in: ignored, saying so.
        none = await send(api, "repository", repository_event("renamed", "acme/nothing", "acme/still-nothing"),
                          "gh-def-3")
        assert (none["status"], none["reason"]) == ("ignored", "no card of tenant default is in acme/nothing"), none


@pytest.mark.stack_env(**ENV)
async def test_bad_repository_deliveries_are_refused_and_other_actions_ignored(stack: Stack) -> None:
    async with webhook_client(stack, clock=Clock(0)) as api:
        no_from = repository_event("renamed", OLD, NEW)
        del no_from["changes"]["repository"]["name"]["from"]
        r = await post(api, "repository", no_from, "gh-bad-1")
        assert r.status_code == 400 and "changes.repository.name.from" in r.text, r.text
        no_owner = repository_event("transferred", OLD, NEW)
        no_owner["changes"]["owner"]["from"] = {}
        r = await post(api, "repository", no_owner, "gh-bad-2")
        assert r.status_code == 400 and "changes.owner.from" in r.text, r.text
        odd = repository_event("renamed", OLD, NEW)
        odd["repository"]["full_name"] = "no owner here"
        r = await post(api, "repository", odd, "gh-bad-3")
        assert r.status_code == 400 and "repository.full_name" in r.text, r.text
        bad_from = repository_event("renamed", OLD, NEW)
        bad_from["changes"]["repository"]["name"]["from"] = "../../etc"
        r = await post(api, "repository", bad_from, "gh-bad-4")
        assert r.status_code == 400 and "former name" in r.text, r.text
        edited = repository_event("renamed", OLD, NEW)
        edited["action"] = "edited"
        r = await post(api, "repository", edited, "gh-edit-1")
        assert r.status_code == 200 and r.json()["status"] == "ignored", r.text
        assert "renamed or transferred" in r.json()["reason"]
        same = repository_event("renamed", NEW, NEW)
        r = await post(api, "repository", same, "gh-same-1")
        assert r.status_code == 200 and r.json()["reason"] == f"repository {NEW} kept its name", r.text
