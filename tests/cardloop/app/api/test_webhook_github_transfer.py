"""A GitHub issue transferred to another repository keeps its card, through the real app, Temporal
and store, on octokit's recorded payloads: the card keyed octo-org/octo-repo#1 stays the card (same
key, same running workflow, same history) once GitHub says the issue is Codertocat/Hello-World#1 now;
its repository follows the issue; GitHub's real comment on the new issue and a project move whose
item now holds it reach that card. A repository renamed under a card is found by the issue's node
id, and a failed CI run naming a pull request under the new name reaches its card once a delivery
carrying the node id told cardloop that name (a run carries none). Deliveries whose ids lead
nowhere are answered as before."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cardloop.contracts.config import Config
from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import Card
from tests.cardloop.app.api.test_webhook_board_ids import in_history, one, planning_running, workflow_ids
from tests.cardloop.app.api.webhook_kit import ENV, Clock, at, hub_signature, webhook_client
from tests.cardloop.app.boards.conftest import FakeGitHub, fixture_json
from tests.cardloop.app.boards.github_payloads import FIELD, ITEM, STATUS_FIELD, TODO, item_node
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)

OLD = "default/github/octo-org:octo-repo#1"          # the card, keyed by the issue before the transfer
OLD_NODE = "MDExOlB1bGxSZXF1ZXN0MzMyNzAzOTcz"        # the transferred example's issue.node_id
NEW_NODE = "MDU6SXNzdWU0NDQ1MDAwNDE="                # changes.new_issue.node_id (and the comment's issue)
OTHER_ITEM = "PVTI_lADOAWcTxs07G84AVqZz"           # an item of another project
COMMENT = "You are totally right! I'll get this fixed right away."   # GitHub's real issue_comment example


def issue(repo: str, node: str) -> dict[str, Any]:
    """The project item's content as GitHub's GraphQL answers it."""
    return {"__typename": "Issue", "id": node, "number": 1, "title": "Spelling error in the README file",
            "body": "It looks like you accidently spelled 'commit' with two 't's.",
            "url": f"https://github.com/{repo}/issues/1", "repository": {"nameWithOwner": repo}}


@pytest.fixture
async def github(stack: Stack) -> AsyncIterator[tuple[FakeGitHub, Config]]:
    fake = FakeGitHub()
    fake.nodes[FIELD] = STATUS_FIELD
    config = stack.config.model_copy(update={"boards": {**stack.config.boards, "github": stack.config.board(
        "github").model_copy(update={"graphql_url": fake.url})}})
    try:
        yield fake, config
    finally:
        fake.close()


async def send(api: httpx.AsyncClient, clock: Clock, kind: str, data: dict[str, Any], when: str,
               delivery: str) -> dict[str, Any]:
    """GitHub's delivery of `kind`, signed, received just after `when` (its event time); its one event."""
    body = json.dumps(data).encode()
    clock.now = at(when) + 1
    r = await api.post("/webhooks/github", content=body, headers={
        "content-type": "application/json", "x-github-event": kind, "x-github-delivery": delivery,
        "x-hub-signature-256": hub_signature(body)})
    assert r.status_code == 200, r.text
    return one(r.json())


def project_move(updated_at: str, to: str | None = TODO) -> dict[str, Any]:
    """GitHub's real projects_v2_item example (its item, its Status field) moved to `to`; None: the
    older payload that names no option (the item's value is read from GitHub)."""
    data = fixture_json("github/projects_v2_item.edited.json")
    data["projects_v2_item"]["updated_at"] = updated_at
    if to is not None:
        data["changes"]["field_value"]["to"] = {"id": to, "color": "GRAY"}
    return data


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_an_issue_transferred_to_another_repository_keeps_its_card_and_its_workflow(
        stack: Stack, github: tuple[FakeGitHub, Config]) -> None:
    fake, config = github
    clock = Clock(0)
    transferred = fixture_json("github/issues.transferred.json")
    async with webhook_client(stack, config=config, clock=clock) as api:
        # No card yet: the transfer is answered as an edit of a card nobody moved, as before.
        early = await send(api, clock, "issues", transferred, "2019-10-25T22:46:30Z", "gh-t-0")
        assert (early["card"], early["status"], early["reason"]) == (
            "default/github/Codertocat:Hello-World#1", "ignored", "no card is known for Codertocat/Hello-World#1")

        # The issue, still in octo-org/octo-repo, moved to Todo on the project: planning runs.
        fake.nodes[ITEM] = item_node(issue("octo-org/octo-repo", OLD_NODE), status="Todo")
        stack.model.inject(delay=30.0)
        first = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:40:00Z"),
                           "2019-10-25T22:40:00Z", "gh-move-1")
        assert (first["card"], first["status"], first["stage"]) == (OLD, "accepted", "planning"), first
        ref, run_id = await planning_running(stack, OLD)
        assert stack.store.board_ids(OLD).uid == OLD_NODE
        await stack.cards.say(ref, "Keep the README's tone.", author="Priya", delivery_id="say-1")
        history = await in_history(stack, OLD, "Keep the README's tone.")

        # Transferred: GitHub names the new issue, with another number, id and node id.
        moved = await send(api, clock, "issues", transferred, "2019-10-25T22:46:30Z", "gh-t-1")
        assert (moved["kind"], moved["card"], moved["board_card"], moved["status"]) == (
            "edit", OLD, "Codertocat/Hello-World#1", "accepted"), moved
        assert "Codertocat/Hello-World#1 is the card default/github/octo-org:octo-repo#1" in moved["renamed"]
        assert moved["workflow_id"] == ref.workflow_id
        card = stack.store.card_fields(OLD)
        assert card is not None and (card.repo, card.url) == (
            "Codertocat/Hello-World", "https://github.com/Codertocat/Hello-World/issues/1")   # follows the issue
        assert stack.store.board_name(OLD) == "Codertocat/Hello-World#1"
        assert stack.store.card_fields("default/github/Codertocat:Hello-World#1") is None
        # The same move told from the new repository (`opened`, changes.old_issue): nothing new.
        told = await send(api, clock, "issues", fixture_json("github/issues.opened.transferred.json"),
                          "2019-05-15T15:20:18Z", "gh-t-2")
        assert (told["card"], told["status"], told["reason"]) == (OLD, "ignored", "nothing the card keeps changed")

        # GitHub's real comment on Codertocat/Hello-World#1 joins the card's history.
        said = await send(api, clock, "issue_comment", fixture_json("github/issue_comment.created.json"),
                          "2019-05-15T15:20:21Z", "gh-c-1")
        assert (said["card"], said["board_card"], said["status"]) == (OLD, "Codertocat/Hello-World#1", "accepted")
        await in_history(stack, OLD, COMMENT)
        assert [m.content for m in stack.store.messages(OLD)][:len(history)] == history
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        assert (await handle.describe()).run_id == run_id   # the same stage run went on throughout

        # The project item now holds the new issue (GitHub's answer): its move reaches the card.
        fake.nodes[ITEM] = item_node(issue("Codertocat/Hello-World", NEW_NODE), status="Done")
        done = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:50:00Z", to=None),
                          "2019-10-25T22:50:00Z", "gh-move-2")
        assert (done["card"], done["board_card"], done["status"], done["stage"]) == (
            OLD, "Codertocat/Hello-World#1", "accepted", "done"), done
        assert done["workflow_id"] == ref.workflow_id
        await stack.wait_state(ref, lambda s: s.stage == "done")
    assert not any("Hello-World" in wf for wf in await workflow_ids(stack))
    assert stack.store.board_ids(OLD).names == ("Codertocat:Hello-World#1",)


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_a_renamed_repository_is_found_by_the_issues_node_id_and_odd_ids_lead_nowhere(
        stack: Stack, github: tuple[FakeGitHub, Config]) -> None:
    fake, config = github
    clock = Clock(0)
    fake.nodes[ITEM] = item_node(issue("Codertocat/Hello-World", NEW_NODE), status="Done")
    comment = fixture_json("github/issue_comment.created.json")
    async with webhook_client(stack, config=config, clock=clock) as api:
        first = await send(api, clock, "projects_v2_item", project_move("2019-05-15T15:20:00Z", to=None),
                           "2019-05-15T15:20:00Z", "gh-move-1")
        key = "default/github/Codertocat:Hello-World#1"
        assert (first["card"], first["status"]) == (key, "accepted"), first
        await stack.wait_state(CardRef.parse(key), lambda s: s.stage == "done")

        # The repository renamed: GitHub's comment names the issue under it, the node id is the same.
        renamed = json.loads(json.dumps(comment).replace("Codertocat/Hello-World", "Codertocat/Hello-Docs"))
        said = await send(api, clock, "issue_comment", renamed, "2019-05-15T15:20:21Z", "gh-c-1")
        assert (said["card"], said["board_card"], said["status"]) == (key, "Codertocat/Hello-Docs#1", "accepted")
        await in_history(stack, key, COMMENT)
        assert stack.store.board_name(key) == "Codertocat/Hello-Docs#1"

        # Another issue of the renamed repository, with an odd node id: no card, as before.
        other = json.loads(json.dumps(renamed))
        other["issue"].update(number=2, node_id={"not": "an id"})
        other["comment"]["body"] = "And this one?"
        unknown = await send(api, clock, "issue_comment", other, "2019-05-15T15:20:21Z", "gh-c-2")
        assert (unknown["card"], unknown["status"]) == ("default/github/Codertocat:Hello-Docs#2", "ignored"), unknown
        assert unknown["reason"] == "no card is known for Codertocat/Hello-Docs#2 yet: move it first"
        # A transfer that names no new repository is refused (400), as a malformed delivery is.
        broken = fixture_json("github/issues.transferred.json")
        del broken["changes"]["new_repository"]
        body = json.dumps(broken).encode()
        clock.now = at("2019-10-25T22:46:31Z")
        r = await api.post("/webhooks/github", content=body, headers={
            "content-type": "application/json", "x-github-event": "issues", "x-github-delivery": "gh-t-9",
            "x-hub-signature-256": hub_signature(body)})
        assert r.status_code == 400 and "changes.new_repository.full_name" in r.text, r.text


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__ERROR_FIXING__AUTO_ADVANCE="false")
async def test_a_failed_run_naming_the_renamed_repository_reaches_the_pull_requests_card(stack: Stack) -> None:
    # The pull request GitHub's workflow_run example is linked to, its card as a project move makes it.
    pull = Card(id="Codertocat/Hello-World#2", tenant="default", board="github", title="Update the README",
                repo="Codertocat/Hello-World", branch="changes")
    ref = stack.cards.import_card(pull)
    stack.store.remember_board_ids(ref.key, uid="PR_kwDOCyJ2ys4QoV6t")
    run = json.loads(json.dumps(fixture_json("github/workflow_run.completed.json")).replace(
        "Codertocat/Hello-World", "Codertocat/Hello-Docs"))   # the repository renamed since
    run["workflow_run"]["conclusion"] = "failure"
    # A run carries no node id: before anything told cardloop the new name, no card is known for it.
    clock = Clock(0)
    async with webhook_client(stack, clock=clock) as api:
        unknown = await send(api, clock, "workflow_run", run, "2020-10-05T16:33:49Z", "gh-run-1")
        assert (unknown["card"], unknown["status"], unknown["reason"]) == (
            "default/github/Codertocat:Hello-Docs#2", "ignored", "no card is known for Codertocat/Hello-Docs#2")
        # A comment on the pull request under the new name carries its node id: the name is learnt.
        comment = json.loads(json.dumps(fixture_json("github/issue_comment.created.json")).replace(
            "Codertocat/Hello-World", "Codertocat/Hello-Docs"))
        comment["issue"].update(number=2, node_id="PR_kwDOCyJ2ys4QoV6t")
        said = await send(api, clock, "issue_comment", comment, "2019-05-15T15:20:21Z", "gh-c-1")
        assert (said["card"], said["board_card"], said["status"]) == (ref.key, "Codertocat/Hello-Docs#2", "accepted")
        # GitHub redelivers the failed run: it reaches the pull request's card and its workflow.
        failed = await send(api, clock, "workflow_run", run, "2020-10-05T16:33:49Z", "gh-run-1-again")
        assert (failed["card"], failed["board_card"], failed["status"], failed["stage"]) == (
            ref.key, "Codertocat/Hello-Docs#2", "accepted", "error_fixing"), failed
        assert failed["workflow_id"] == ref.workflow_id
    await stack.cards.wait_for(ref, lambda s: any(r.stage == "error_fixing" for r in s.history), timeout=60)


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_a_move_naming_the_new_issue_before_the_transfer_is_merged_into_the_card(
        stack: Stack, github: tuple[FakeGitHub, Config]) -> None:
    fake, config = github
    clock = Clock(0)
    dup = "default/github/Codertocat:Hello-World#1"
    async with webhook_client(stack, config=config, clock=clock) as api:
        fake.nodes[ITEM] = item_node(issue("octo-org/octo-repo", OLD_NODE), status="Todo")
        stack.model.inject(delay=30.0)
        first = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:40:00Z"),
                           "2019-10-25T22:40:00Z", "gh-move-1")
        assert (first["card"], first["status"], first["stage"]) == (OLD, "accepted", "planning"), first
        ref, run_id = await planning_running(stack, OLD)
        await stack.cards.say(ref, "Keep the README's tone.", author="Priya", delivery_id="say-1")
        history = await in_history(stack, OLD, "Keep the README's tone.")

        # Transferred; the new issue, added to another project, is moved there before the transfer
        # delivery arrives: neither its node id nor that project's item leads to the card yet, so
        # a card is created for it and its stage starts.
        fake.nodes[OTHER_ITEM] = item_node(issue("Codertocat/Hello-World", NEW_NODE), status="Todo")
        stack.model.inject(delay=30.0)
        other = project_move("2019-10-25T22:47:00Z", to=None)
        other["projects_v2_item"]["node_id"] = OTHER_ITEM
        early = await send(api, clock, "projects_v2_item", other, "2019-10-25T22:47:00Z", "gh-move-2")
        assert (early["card"], early["status"], early["stage"]) == (dup, "accepted", "planning"), early
        dup_ref, _ = await planning_running(stack, dup)
        # Someone comments on the new issue meanwhile: the comment joins the new card's history.
        early_comment = fixture_json("github/issue_comment.created.json")
        early_comment["comment"]["body"] = "Said before the transfer was known."
        before = await send(api, clock, "issue_comment", early_comment, "2019-05-15T15:20:21Z", "gh-c-0")
        assert (before["card"], before["status"]) == (dup, "accepted"), before
        await in_history(stack, dup, "Said before the transfer was known.")

        # The transfer delivery links the two: the new card is merged into the card, whose run goes on.
        moved = await send(api, clock, "issues", fixture_json("github/issues.transferred.json"),
                           "2019-10-25T22:46:30Z", "gh-t-1")
        assert (moved["kind"], moved["card"], moved["board_card"], moved["merged"], moved["status"]) == (
            "edit", OLD, "Codertocat/Hello-World#1", dup, "accepted"), moved
        assert f"{dup}, created for it meanwhile, was merged into it" in moved["renamed"]
        # The duplicate's stage was cancelled (its history and ledger stay under its key) and it says so.
        dup_state = await stack.wait_state(dup_ref, lambda s: s.status == "idle" and bool(s.history))
        assert [(r.stage, r.outcome) for r in dup_state.history] == [("planning", "cancelled")]
        gone = stack.store.card_gone(dup)
        assert gone is not None and gone[0] == f"merged into {OLD} (the same card under a new id on github)"
        await in_history(stack, OLD, "Said before the transfer was known.")
        # The card took the duplicate's move (to the stage it runs): the same run goes on, nothing ran twice.
        state = await stack.wait_state(ref, lambda s: s.status == "running")
        assert (state.stage, state.stage_runs) == ("planning", 1)
        handle = stack.client.get_workflow_handle(ref.workflow_id)
        assert (await handle.describe()).run_id == run_id
        card = stack.store.card_fields(OLD)
        assert card is not None and card.repo == "Codertocat/Hello-World"
        assert stack.store.board_name(OLD) == "Codertocat/Hello-World#1"   # board writes go to the new issue

        # Redelivered, the transfer is a duplicate; the new issue's comment and moves reach the card,
        # though a card is stored under the new issue's key.
        again = await send(api, clock, "issues", fixture_json("github/issues.transferred.json"),
                           "2019-10-25T22:46:30Z", "gh-t-1-again")
        assert (again["card"], again["status"]) == (OLD, "duplicate"), again
        said = await send(api, clock, "issue_comment", fixture_json("github/issue_comment.created.json"),
                          "2019-05-15T15:20:21Z", "gh-c-1")
        assert (said["card"], said["board_card"], said["status"]) == (OLD, "Codertocat/Hello-World#1", "accepted")
        await in_history(stack, OLD, COMMENT)
        assert [m.content for m in stack.store.messages(OLD)][:len(history)] == history
        assert COMMENT not in [m.content for m in stack.store.messages(dup)]
        # What was said on the duplicate joined the card's history once, at the merge.
        assert [m.content for m in stack.store.messages(OLD)].count("Said before the transfer was known.") == 1
        fake.nodes[ITEM] = item_node(issue("Codertocat/Hello-World", NEW_NODE), status="Done")
        done = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:50:00Z", to=None),
                          "2019-10-25T22:50:00Z", "gh-move-3")
        assert (done["card"], done["status"], done["stage"]) == (OLD, "accepted", "done"), done
        await stack.wait_state(ref, lambda s: s.stage == "done")
    dup_after = await stack.cards.state(dup_ref)
    assert dup_after is not None and dup_after.stage_runs == 1   # the duplicate never ran again


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36)
async def test_a_move_of_the_project_item_before_the_transfer_delivery_reaches_the_card(
        stack: Stack, github: tuple[FakeGitHub, Config]) -> None:
    fake, config = github
    clock = Clock(0)
    async with webhook_client(stack, config=config, clock=clock) as api:
        fake.nodes[ITEM] = item_node(issue("octo-org/octo-repo", OLD_NODE), status="Todo")
        stack.model.inject(delay=30.0)
        first = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:40:00Z"),
                           "2019-10-25T22:40:00Z", "gh-move-1")
        assert (first["card"], first["status"], first["stage"]) == (OLD, "accepted", "planning"), first
        ref, run_id = await planning_running(stack, OLD)

        # Transferred; the project item, which holds the new issue now (a new number and node id),
        # is moved before the transfer delivery arrives: the item leads the move to the card.
        fake.nodes[ITEM] = item_node(issue("Codertocat/Hello-World", NEW_NODE), status="Todo")
        early = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:47:00Z", to=None),
                           "2019-10-25T22:47:00Z", "gh-move-2")
        assert (early["card"], early["board_card"], early["status"], early["stage"]) == (
            OLD, "Codertocat/Hello-World#1", "accepted", "planning"), early
        assert "Codertocat/Hello-World#1 is the card default/github/octo-org:octo-repo#1" in early["renamed"]
        assert stack.store.card_fields("default/github/Codertocat:Hello-World#1") is None
        assert stack.store.board_name(OLD) == "Codertocat/Hello-World#1"
        state = await stack.wait_state(ref, lambda s: s.status == "running")
        assert (state.stage, state.stage_runs) == ("planning", 1)   # the move to its running stage: it goes on
        assert (await stack.client.get_workflow_handle(ref.workflow_id).describe()).run_id == run_id

        # The transfer delivery then only moves the card's repository with its issue.
        moved = await send(api, clock, "issues", fixture_json("github/issues.transferred.json"),
                           "2019-10-25T22:46:30Z", "gh-t-1")
        assert (moved["kind"], moved["card"], moved["status"]) == ("edit", OLD, "accepted"), moved
        assert "merged" not in moved
        card = stack.store.card_fields(OLD)
        assert card is not None and card.repo == "Codertocat/Hello-World"
    assert not any("Hello-World" in wf for wf in await workflow_ids(stack))


@pytest.mark.stack_env(**ENV, CARDLOOP_GITHUB_TOKEN="ghp_" + "T" * 36, CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_card_created_early_that_finished_a_stage_run_is_not_merged(
        stack: Stack, github: tuple[FakeGitHub, Config]) -> None:
    fake, config = github
    clock = Clock(0)
    dup = "default/github/Codertocat:Hello-World#1"
    async with webhook_client(stack, config=config, clock=clock) as api:
        fake.nodes[ITEM] = item_node(issue("octo-org/octo-repo", OLD_NODE), status="Done")
        first = await send(api, clock, "projects_v2_item", project_move("2019-10-25T22:40:00Z", to=None),
                           "2019-10-25T22:40:00Z", "gh-move-1")
        assert (first["card"], first["stage"]) == (OLD, "done"), first
        # The new issue is moved on another project's item and its planning runs to its end there.
        fake.nodes[OTHER_ITEM] = item_node(issue("Codertocat/Hello-World", NEW_NODE), status="Todo")
        other = project_move("2019-10-25T22:47:00Z", to=None)
        other["projects_v2_item"]["node_id"] = OTHER_ITEM
        early = await send(api, clock, "projects_v2_item", other, "2019-10-25T22:47:00Z", "gh-move-2")
        assert (early["card"], early["stage"]) == (dup, "planning"), early
        dup_ref = CardRef.parse(dup)
        await stack.wait_state(dup_ref, lambda s: s.status == "idle" and bool(s.history))

        # The transfer delivery finds it with work of its own: not merged, and the answer says why.
        moved = await send(api, clock, "issues", fixture_json("github/issues.transferred.json"),
                           "2019-10-25T22:46:30Z", "gh-t-1")
        assert (moved["card"], moved["status"]) == (dup, "ignored"), moved
        assert moved["reason"].startswith(f"{dup}, created for Codertocat/Hello-World#1 before this delivery said "
                                          f"it is the card {OLD}, has finished stage runs of its own (planning "
                                          "(run 1) completed): it is not merged"), moved["reason"]
        assert stack.store.card_gone(dup) is None and stack.store.board_ids(OLD).names == ()
        state = await stack.cards.state(dup_ref)
        assert state is not None and [(r.stage, r.outcome) for r in state.history] == [("planning", "completed")]
        again = await send(api, clock, "issues", fixture_json("github/issues.transferred.json"),
                           "2019-10-25T22:46:30Z", "gh-t-1-again")
        assert (again["card"], again["status"]) == (dup, "duplicate"), again
