"""GitHub Projects (v2): comments on the card's issue or pull request, its Status, a label.

    comment  PullRequests.comment (github_results.py, PyGithub): the comment carrying the hidden
             marker `<!-- cardloop:{marker} -->` and written by cardloop's account (write_actor,
             else the token's login) is edited, else one is posted
    move     GraphQL: the issue's (or draft item's) project item and its Status value are read;
             when the Status differs, the option id of `column` (resolved by name among the
             field's options) is set with `updateProjectV2ItemFieldValue`
    label    REST: the issue's labels are read; the label is added when missing

The card's issue is its board id `owner/repo#number` (or its URL); a draft item (`PVTI_...`)
has no issue, so it can be moved but not commented on.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.board_clients.base import BoardCard, Http, Written, same_name
from cardloop.integrations.github_results import PullRequests, repo_name, thread_of
from cardloop.integrations.upstream import UpstreamError

_CARD = re.compile(r"([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#([0-9]{1,9})")

_ITEM_FIELDS = """
  id
  project { id title field(name: $field) { ... on ProjectV2SingleSelectField { id options { id name } } } }
  fieldValueByName(name: $field) { ... on ProjectV2ItemFieldSingleSelectValue { name optionId } }
"""
ITEMS_OF_ISSUE = """
query($owner: String!, $name: String!, $number: Int!, $field: String!) {
  repository(owner: $owner, name: $name) {
    issueOrPullRequest(number: $number) {
      ... on Issue { projectItems(first: 20) { nodes {""" + _ITEM_FIELDS + """} } }
      ... on PullRequest { projectItems(first: 20) { nodes {""" + _ITEM_FIELDS + """} } }
    }
  }
}"""
DRAFT_ITEM = """
query($item: ID!, $field: String!) {
  node(id: $item) { ... on ProjectV2Item {""" + _ITEM_FIELDS + """} }
}"""
SET_STATUS = """
mutation($project: ID!, $item: ID!, $field: ID!, $option: String!) {
  updateProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, fieldId: $field,
                                        value: {singleSelectOptionId: $option}}) {
    projectV2Item { id }
  }
}"""


def issue_of(card: BoardCard) -> tuple[str, int] | None:
    """(owner/name, number) of the card's issue: its id, its URL, else its pull request."""
    m = _CARD.fullmatch(card.card_id)
    if m:
        return m.group(1), int(m.group(2))
    return thread_of(card.url) or thread_of(card.pull_request)


class GitHubBoard:
    board = "github"

    def __init__(self, api_url: str, graphql_url: str, token: Secret | str, *, status_field: str = "Status",
                 project: str = "", timeout: float = 30.0, write_interval: float | None = 1.0,
                 login: str = "") -> None:
        self._token = reveal(token) or ""
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/vnd.github+json",
                   "X-GitHub-Api-Version": "2022-11-28"}
        self.rest = Http("GitHub", api_url, headers, secret=self._token, timeout=timeout)
        self.gql = Http("GitHub", graphql_url, headers, secret=self._token, timeout=timeout)
        # GitHub asks integrations to space their writes (a second apart); reads go at once.
        # Whose comments are cardloop's: `login` (write_actor), else the token's user.
        self.pulls = PullRequests(api_url, self._token, timeout=timeout, request_interval=None,
                                  write_interval=write_interval, login=login)
        self.status_field = status_field
        self.project = project

    def close(self) -> None:
        self.rest.close()
        self.gql.close()
        self.pulls.close()

    def comment(self, card: BoardCard, *, body: str, marker: str) -> Written:
        target = issue_of(card)
        if target is None:
            raise UpstreamError(f"the card {card.card_id} links no GitHub issue or pull request to comment on",
                                kind="not_found", retryable=False)
        repo, number = target
        cid = self.pulls.comment(repo, number, body=body, marker=marker)  # edits the marked one, else posts
        return Written(done=f"commented on {repo}#{number} (comment {cid})", target=f"{repo}#{number}")

    def move(self, card: BoardCard, column: str, *, key: str = "") -> Written:
        item = self._item(card)
        current = (item.get("fieldValueByName") or {}).get("name")
        project = item["project"]
        where = f"project {project.get('title') or project['id']}"
        if same_name(current, column):
            return Written(done=f"already in {column!r} on {where}", acted=False, target=card.card_id)
        fld = project.get("field") or {}
        options = fld.get("options") or []
        option = next((o for o in options if same_name(o.get("name"), column)), None)
        if not fld.get("id") or option is None:
            names = ", ".join(repr(o.get("name")) for o in options) or "none"
            raise UpstreamError(f"the {self.status_field} field of {where} has no option {column!r} (options: {names})",
                                kind="invalid_request", retryable=False)
        self.gql.graphql(SET_STATUS, {"project": project["id"], "item": item["id"], "field": fld["id"],
                                      "option": option["id"]}, f"setting {self.status_field} of {card.card_id}")
        return Written(done=f"moved from {current or 'no status'!r} to {column!r} on {where}", target=card.card_id)

    def _item(self, card: BoardCard) -> dict[str, Any]:
        field = self.status_field
        doing = f"reading the project item of {card.card_id}"
        if card.card_id.startswith("PVTI_"):
            node = self.gql.graphql(DRAFT_ITEM, {"item": card.card_id, "field": field}, doing).get("node")
            items = [node] if isinstance(node, dict) and node.get("id") else []
        else:
            target = issue_of(card)
            if target is None:
                raise UpstreamError(f"the card {card.card_id} names no issue or project item", kind="not_found",
                                    retryable=False)
            full, owner = repo_name(target[0])
            data = self.gql.graphql(ITEMS_OF_ISSUE, {"owner": owner, "name": full.split("/", 1)[1],
                                                     "number": target[1], "field": field}, doing)
            thread = (data.get("repository") or {}).get("issueOrPullRequest") or {}
            items = [n for n in (thread.get("projectItems") or {}).get("nodes") or [] if isinstance(n, dict)]
        if self.project:
            items = [i for i in items if (i.get("project") or {}).get("id") == self.project]
        if not items:
            scope = f" in project {self.project}" if self.project else ""
            raise UpstreamError(f"{card.card_id} is on no GitHub project{scope}", kind="not_found", retryable=False)
        return items[0]

    def label(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        target = issue_of(card)
        if target is None:
            raise UpstreamError(f"the card {card.card_id} links no GitHub issue to label", kind="not_found",
                                retryable=False)
        repo, number = target
        path = f"/repos/{repo}/issues/{number}/labels"
        have = self.rest.json("GET", path, f"reading the labels of {repo}#{number}", params={"per_page": 100}) or []
        if any(isinstance(x, dict) and same_name(x.get("name"), label) for x in have):
            return Written(done=f"{repo}#{number} already has label {label!r}", acted=False, target=f"{repo}#{number}")
        self.rest.json("POST", path, f"labelling {repo}#{number}", json={"labels": [label]})
        return Written(done=f"labelled {repo}#{number} {label!r}", target=f"{repo}#{number}")

    def unlabel(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        target = issue_of(card)
        if target is None:
            raise UpstreamError(f"the card {card.card_id} links no GitHub issue", kind="not_found", retryable=False)
        repo, number = target
        path = f"/repos/{repo}/issues/{number}/labels"
        have = self.rest.json("GET", path, f"reading the labels of {repo}#{number}", params={"per_page": 100}) or []
        found = next((x for x in have if isinstance(x, dict) and same_name(x.get("name"), label)), None)
        if found is None:
            return Written(done=f"{repo}#{number} has no label {label!r}", acted=False, target=f"{repo}#{number}")
        self.rest.json("DELETE", f"{path}/{urllib.parse.quote(str(found['name']), safe='')}",
                       f"removing label {label!r} from {repo}#{number}")
        return Written(done=f"removed label {label!r} from {repo}#{number}", target=f"{repo}#{number}")

