"""GitHub Projects v2 payloads for the board tests: octokit's real projects_v2_item example
with the option ids and item contents the loopback GraphQL server answers with."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.cardloop.app.boards.conftest import fixture_json

FIELD = "PVTF_lADOAWcTxs07G84AAali"      # the real example's field_node_id
ITEM = "PVTI_lADOAWcTxs07G84AVqWu"       # the real example's item node_id
TODO, IN_PROGRESS, DONE, PARKED = "f75ad846", "47fc9ee4", "98236657", "0e1d2c3b"

STATUS_FIELD = {"__typename": "ProjectV2SingleSelectField", "name": "Status", "options": [
    {"id": TODO, "name": "Todo"}, {"id": IN_PROGRESS, "name": "In Progress"},
    {"id": DONE, "name": "Done"}, {"id": PARKED, "name": "Parked"}]}


def item_node(content: dict[str, Any] | None, status: str | None = "In Progress") -> dict[str, Any]:
    values: list[dict[str, Any]] = [{"__typename": "ProjectV2ItemFieldTextValue"}]
    if status is not None:
        values.append({"__typename": "ProjectV2ItemFieldSingleSelectValue", "name": status, "field": {"id": FIELD}})
    return {"__typename": "ProjectV2Item", "fieldValues": {"nodes": values}, "content": content}


ISSUE = {"__typename": "Issue", "number": 142, "title": "Retry failed payouts with backoff",
         "body": "Payouts failing with a 5xx are dropped.", "url": "https://github.com/Octocoders/payments/issues/142",
         "repository": {"nameWithOwner": "Octocoders/payments"}}
PULL = {"__typename": "PullRequest", "number": 7, "title": "Backoff for payouts", "body": "Closes #142",
        "url": "https://github.com/Octocoders/payments/pull/7", "headRefName": "priya/payout-backoff",
        "repository": {"nameWithOwner": "Octocoders/payments"}}
DRAFT = {"__typename": "DraftIssue", "title": "Spike: idempotency keys", "body": "Find out what the bank keeps."}


def headers(event: str, delivery: str = "72d3162e-cc78-11e3-81ab-4c9367dc0958") -> httpx.Headers:
    return httpx.Headers({"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
                          "X-GitHub-Hook-ID": "292430182", "Content-Type": "application/json"})


def moved(to: str | None = IN_PROGRESS, frm: str | None = TODO, **extra: Any) -> bytes:
    """The real projects_v2_item example with the newer payload's `from`/`to` options added."""
    data = fixture_json("github/projects_v2_item.edited.json")
    change = data["changes"]["field_value"]
    change["from"] = {"id": frm, "color": "GRAY"} if frm else None
    change["to"] = {"id": to, "color": "YELLOW"} if to else None
    change.update(extra)
    return json.dumps(data).encode()


def repository_event(action: str, old: str, new: str) -> dict[str, Any]:
    """GitHub's `repository` delivery (`renamed` or `transferred`) of the repository `old` named
    `new` now: its objects (repository, organization, sender) GitHub's own from the recorded
    issue_comment example, renamed; `changes` as GitHub's renamed (changes.repository.name.from)
    and transferred (changes.owner.from.organization) payloads carry them."""
    base = fixture_json("github/issue_comment.created.json")
    repo = json.loads(json.dumps(base["repository"]).replace("Codertocat/Hello-World", new))
    owner, name = new.split("/")
    repo.update(name=name, full_name=new)
    repo["owner"]["login"] = owner
    if action == "renamed":
        changes: dict[str, Any] = {"repository": {"name": {"from": old.split("/")[1]}}}
    else:
        changes = {"owner": {"from": {"organization": {**base["organization"], "login": old.split("/")[0]}}}}
    return {"action": action, "changes": changes, "repository": repo,
            "organization": {**base["organization"], "login": owner}, "sender": base["sender"]}
