"""GitHub: Projects (v2) status moves, issue/PR comments and failed CI runs.

A `projects_v2_item` webhook names the changed field and the new option by node id / option id
and says nothing about the item's issue. cardloop resolves the field's name and options and the
item's content through GitHub's GraphQL API (config: graphql_url, token_env), cached in memory
for a few minutes, so a burst of moves costs one query. A GraphQL failure is GitHub's, not the
sender's: it is WebhookError(502), so the delivery shows as failed and can be redelivered.

    event               action      result
    projects_v2_item    edited      transition (only the configured status_field)
    projects_v2_item    archived    archive: the card of the item's issue, PR or draft
                        deleted     (looked up by content_node_id; a draft's card is the item id)
    issue_comment       created     comment on "<owner>/<repo>#<number>"
    issues              transferred edit: the issue moved to another repository (changes.new_issue,
                        opened      changes.new_repository; `opened` with changes.old_issue is the
                                    same move told from the new repository)
    repository          renamed     repository: the cards the board names under the old name
                        transferred (changes.repository.name.from, changes.owner.from) are named
                                    under the new one, and their repository follows
    workflow_run        completed   build_failed per linked PR when the conclusion is a failure
    check_suite         completed   build_failed per linked PR when the conclusion is a failure
    ping, others        -           Ignored

A card linked to an issue or pull request is keyed "<owner>/<repo>#<number>" (its first key stays).
Each event also carries the issue's or pull request's node id (BoardEvent.board_uid: a project
item's content_node_id, a comment's issue.node_id), which a repository renamed or moved to another
owner keeps, so a delivery naming "<owner>/<new-name>#<number>" reaches the card it already is.
An issue transferred to another repository gets a new number, a new numeric id and a new node id
(GitHub's real payloads: the octokit example's issue and new_issue differ in all three, and so did
every transfer recorded elsewhere); what links the two is the `issues` transferred delivery itself,
which names both: its event names the new issue and says the old one was its former id (`was`),
so the card records "<new repo>#<number>" as its later name (boards/identity.py) and its
repository follows the issue (repo_moved). Comments, project moves and CI runs naming the new
issue then reach the card by that name. A project item keeps its node id through the transfer
(BoardEvent.board_item, recorded beside the card at each move): a move of the item naming the new
issue reaches the card even before the transfer's delivery (or without it). A card created under
the new issue all the same (the issue moved on another project's item first) is merged into the
card when the transfer's delivery arrives (boards/identity.py).

A repository renamed or moved to another owner (`repository` renamed or transferred) renames the
cards the board names under it (store.rename_repository): a CI run names a pull request by its
repository's name alone, with no node id, so without it a failed run after a rename would find
no card until some other delivery taught cardloop the new name.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from cardloop.app.boards.cache import TTLCache
from cardloop.app.boards.events import BoardEvent, Ignored, WebhookError
from cardloop.app.boards.payload import (
    bad,
    event,
    header,
    load_object,
    lookup,
    opt_int,
    opt_list,
    opt_obj,
    opt_str,
    req_int,
    req_obj,
    req_str,
    short,
)
from cardloop.app.boards.replay import iso_time, json_object
from cardloop.app.boards.signatures import verify_github
from cardloop.contracts.config import BoardConfig
from cardloop.contracts.secrets import Secret

# Conclusions that mean "the build is broken"; cancelled, neutral and skipped runs are not.
FAILED_CONCLUSIONS = frozenset({"failure", "timed_out"})
# GitHub gives a webhook receiver 10 s; the lookup must leave time for the rest of the request.
GRAPHQL_TIMEOUT = httpx.Timeout(6.0, connect=3.0)
CACHE_TTL_SECONDS = 300.0
# Where each event's signed body says when it happened (checked against the replay window).
_EVENT_TIME = {"projects_v2_item": "projects_v2_item.updated_at", "issue_comment": "comment.updated_at",
               "issues": "issue.updated_at", "workflow_run": "workflow_run.updated_at",
               "check_suite": "check_suite.updated_at"}
# GitHub's owner and repository names: letters, digits, '-', and (repositories) '_' and '.'.
_FULL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9_.-]{1,100}")
_API_REPO = re.compile(r"/repos/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/?\Z")
# A global node id: "I_kwDOKm4p7M6qMdqX", or the older base64 form "MDU6SXNzdWU0NDQ1MDAwNDE=".
_NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+/=-]{0,299}")


@dataclass(frozen=True)
class ProjectField:
    name: str
    options: Mapping[str, str] = field(default_factory=dict)   # single-select option id -> name


@dataclass(frozen=True)
class ProjectItem:
    content_type: str | None             # "Issue", "PullRequest", "DraftIssue"; None when redacted
    number: int | None = None
    title: str | None = None
    body: str | None = None
    url: str | None = None
    repo: str | None = None              # nameWithOwner
    branch: str | None = None            # a pull request's head branch
    node_id: str | None = None           # the issue's or pull request's node id (its card's board_uid)
    values: Mapping[str, str] = field(default_factory=dict)   # field node id -> selected option name


def _field_selection() -> str:
    return """field: node(id: $field) {
    __typename
    ... on ProjectV2FieldCommon { name }
    ... on ProjectV2SingleSelectField { options { id name } }
  }"""


def _item_selection() -> str:
    return """item: node(id: $item) {
    __typename
    ... on ProjectV2Item {
      fieldValues(first: 50) {
        nodes {
          __typename
          ... on ProjectV2ItemFieldSingleSelectValue {
            name
            field { ... on ProjectV2FieldCommon { id } }
          }
        }
      }
      content {
        __typename
        ... on Issue { id number title body url repository { nameWithOwner } }
        ... on PullRequest { id number title body url headRefName repository { nameWithOwner } }
        ... on DraftIssue { title body }
      }
    }
  }"""


# The issue or pull request a project item holds, by the payload's content_node_id: an archived or
# deleted item is looked up by what it held (a deleted item's own node is gone).
CONTENT_QUERY = """query CardloopProjectContent($content: ID!) {
  content: node(id: $content) {
    __typename
    ... on Issue { number repository { nameWithOwner } }
    ... on PullRequest { number repository { nameWithOwner } }
  }
}"""


def build_query(field_id: str | None, item_id: str | None) -> tuple[str, dict[str, str]]:
    """One query for whichever of the two nodes is wanted (GraphQL refuses unused variables)."""
    params, parts, variables = [], [], {}
    if field_id is not None:
        params.append("$field: ID!")
        parts.append(_field_selection())
        variables["field"] = field_id
    if item_id is not None:
        params.append("$item: ID!")
        parts.append(_item_selection())
        variables["item"] = item_id
    return f"query CardloopProjectItem({', '.join(params)}) {{\n  " + "\n  ".join(parts) + "\n}", variables


class GitHubGraphQL:
    """Resolves project fields and items, cached per node id (an LRU with a TTL).

    Concurrent deliveries that need the same nodes share one request in flight."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: Callable[[], Secret | None], token_env: str,
                 ttl: float = CACHE_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._http = http
        self._url = url
        self._token = token
        self._token_env = token_env
        self.fields: TTLCache[str, ProjectField] = TTLCache(maxsize=256, ttl=ttl, clock=clock)
        self.items: TTLCache[str, ProjectItem] = TTLCache(maxsize=1024, ttl=ttl, clock=clock)
        self._inflight: dict[tuple[str | None, str | None], asyncio.Future[None]] = {}
        self.queries = 0   # requests sent, for tests and metrics

    def cached_field(self, field_id: str) -> ProjectField | None:
        return self.fields.get(field_id)

    async def resolve(self, field_id: str, item_id: str, *, fresh_item: bool = False,
                      fresh_field: bool = False) -> tuple[ProjectField, ProjectItem]:
        """The field and the item; `fresh_*` bypasses the cache (the item's current values are
        needed live when the payload does not say which option was chosen)."""
        field_ = None if fresh_field else self.fields.get(field_id)
        item = None if fresh_item else self.items.get(item_id)
        if field_ is None or item is None:
            await self._fetch(None if field_ is not None else field_id, None if item is not None else item_id,
                              share=not (fresh_item or fresh_field))
            field_ = field_ or self.fields.get(field_id)
            item = item or self.items.get(item_id)
        if field_ is None or item is None:  # only a TTL shorter than the request could cause this
            raise WebhookError(502, "GitHub GraphQL lookup did not yield the project field and item")
        return field_, item

    async def _fetch(self, field_id: str | None, item_id: str | None, share: bool) -> None:
        if not share:
            await self._query(field_id, item_id)
            return
        key = (field_id, item_id)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._query(field_id, item_id))
            self._inflight[key] = task

            def done(t: asyncio.Future[None]) -> None:
                self._inflight.pop(key, None)
                if not t.cancelled():
                    t.exception()  # retrieved here too, so a failure nobody awaits is not logged as lost

            task.add_done_callback(done)
        # shield: one caller giving up (client disconnect) must not cancel the others' lookup.
        await asyncio.shield(task)

    async def _query(self, field_id: str | None, item_id: str | None) -> None:
        query, variables = build_query(field_id, item_id)
        data = await self._post(query, variables)
        try:
            if field_id is not None:
                self.fields.put(field_id, _parse_field(data))
            if item_id is not None:
                self.items.put(item_id, _parse_item(data))
        except WebhookError as exc:  # a shape we did not expect is GitHub's doing, not the sender's
            raise WebhookError(502, f"unexpected GitHub GraphQL response: {exc.message}") from None

    async def content(self, content_id: str) -> tuple[str, int] | None:
        """The repository and number of an issue or pull request by its node id; None when
        GitHub no longer has it (deleted) or it is something else (a draft issue)."""
        data = await self._post(CONTENT_QUERY, {"content": content_id}, missing_ok=True)
        try:
            if opt_str(data, "content.__typename") not in ("Issue", "PullRequest"):
                return None
            return req_str(data, "content.repository.nameWithOwner"), req_int(data, "content.number")
        except WebhookError as exc:
            raise WebhookError(502, f"unexpected GitHub GraphQL response: {exc.message}") from None

    async def _post(self, query: str, variables: dict[str, str], *, missing_ok: bool = False) -> dict[str, Any]:
        """The answer's `data`; WebhookError(502/503) for anything GitHub did wrong. `missing_ok`:
        a node that is not found is null in `data` rather than an error."""
        token = self._token()
        if token is None:
            raise WebhookError(503, f"{self._token_env} is not set: GitHub project items cannot be resolved")
        self.queries += 1
        try:
            response = await self._http.post(
                self._url, json={"query": query, "variables": variables}, timeout=GRAPHQL_TIMEOUT,
                headers={"Authorization": f"bearer {token.reveal()}", "Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise WebhookError(502, f"GitHub GraphQL at {self._url} is unreachable: {type(exc).__name__}") from None
        try:
            payload = response.json()
        except (ValueError, RecursionError):
            payload = None
        if response.status_code != 200:
            detail = payload.get("message") if isinstance(payload, dict) else None
            raise WebhookError(502, f"GitHub GraphQL answered {response.status_code}"
                               + (f": {str(detail)[:200]}" if detail else ""))
        if not isinstance(payload, dict):
            raise WebhookError(502, "GitHub GraphQL answered with something other than a JSON object")
        errors = payload.get("errors")
        if errors and missing_ok and isinstance(errors, list) \
                and all(isinstance(e, dict) and e.get("type") == "NOT_FOUND" for e in errors):
            errors = None
        if errors:
            messages = [str(e.get("message", e))[:200] if isinstance(e, dict) else str(e)[:200]
                        for e in (errors if isinstance(errors, list) else [errors])][:3]
            raise WebhookError(502, "GitHub GraphQL errors: " + "; ".join(messages))
        try:
            return req_obj(payload, "data")
        except WebhookError as exc:
            raise WebhookError(502, f"unexpected GitHub GraphQL response: {exc.message}") from None


def _parse_field(data: dict[str, Any]) -> ProjectField:
    req_obj(data, "field")
    options: dict[str, str] = {}
    for i, _ in enumerate(opt_list(data, "field.options")):
        options[req_str(data, f"field.options.{i}.id")] = req_str(data, f"field.options.{i}.name")
    return ProjectField(name=req_str(data, "field.name"), options=options)


def _parse_item(data: dict[str, Any]) -> ProjectItem:
    req_obj(data, "item")
    values: dict[str, str] = {}
    for value in opt_list(data, "item.fieldValues.nodes"):
        if isinstance(value, dict) and value.get("__typename") == "ProjectV2ItemFieldSingleSelectValue":
            field_id, name = opt_str(value, "field.id"), opt_str(value, "name")
            if field_id and name:
                values[field_id] = name
    if opt_obj(data, "item.content") is None:  # the token cannot see the content (REDACTED) or there is none
        return ProjectItem(content_type=None, values=values)
    return ProjectItem(
        content_type=opt_str(data, "item.content.__typename"),
        number=opt_int(data, "item.content.number"),
        title=opt_str(data, "item.content.title"),
        body=opt_str(data, "item.content.body"),
        url=opt_str(data, "item.content.url"),
        repo=opt_str(data, "item.content.repository.nameWithOwner"),
        branch=opt_str(data, "item.content.headRefName"),
        node_id=_node_id(data, "item.content.id"),
        values=values,
    )


def _repo_from_api_url(url: str | None) -> str | None:
    match = _API_REPO.search(url or "")
    return match.group(1) if match else None


class GitHubAdapter:
    name = "github"
    secret_env = "CARDLOOP_GITHUB_WEBHOOK_SECRET"

    def __init__(self, board: BoardConfig, graphql: GitHubGraphQL) -> None:
        self.board = board
        self.graphql = graphql

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None:
        verify_github(headers, body, secret)

    def signed_content(self, body: bytes) -> bytes:
        return body

    def event_time(self, headers: Mapping[str, str], body: bytes) -> float | None:
        """The updated_at of the object the event (X-GitHub-Event) is about; other events carry none."""
        path = _EVENT_TIME.get(header(headers, "X-GitHub-Event") or "")
        return iso_time(json_object(body), path) if path else None

    async def parse(self, headers: Mapping[str, str], body: bytes) -> list[BoardEvent] | Ignored:
        data = load_object(body)
        kind = header(headers, "X-GitHub-Event")
        if kind is None:
            raise bad("missing X-GitHub-Event header")
        if kind == "ping":
            return Ignored(reason="ping: the webhook is set up")
        handler = {
            "projects_v2_item": self._project_item,
            "issue_comment": self._issue_comment,
            "issues": self._issues,
            "workflow_run": self._workflow_run,
            "check_suite": self._check_suite,
            "repository": self._repository,
        }.get(kind)
        if handler is None:
            return Ignored(reason=f"GitHub event {short(kind)} is not one cardloop acts on")
        return await handler(headers, data)

    # -- helpers ---------------------------------------------------------------------------------

    def _tenant(self, data: dict[str, Any]) -> str | None:
        return self.board.named_tenant(opt_str(data, "organization.login") or opt_str(data, "repository.owner.login"))

    @staticmethod
    def _delivery(headers: Mapping[str, str]) -> str:
        delivery = header(headers, "X-GitHub-Delivery")
        if delivery is None:
            raise bad("missing X-GitHub-Delivery header")
        return delivery

    def _is_status(self, name: str) -> bool:
        return name.casefold() == self.board.status_field.casefold()

    # -- projects_v2_item ------------------------------------------------------------------------

    async def _project_item(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        action = opt_str(data, "action")
        if action in ("archived", "deleted"):
            return await self._item_gone(headers, data, action)
        if action != "edited":
            return Ignored(reason=f"projects_v2_item {short(action)}: cardloop acts on field edits, archived "
                                  "and deleted items")
        change = opt_obj(data, "changes.field_value")
        if change is None:
            return Ignored(reason="project item edit changed no field value")
        field_type = opt_str(change, "field_type")
        if field_type is not None and field_type != "single_select":
            return Ignored(reason=f"a {short(field_type)} field changed; the {self.board.status_field} field "
                                  "is a single select")
        field_id = req_str(data, "changes.field_value.field_node_id")
        item_id = req_str(data, "projects_v2_item.node_id")
        delivery = self._delivery(headers)
        # Newer payloads carry the chosen option ({id, name}) as `to`; older ones carry nothing,
        # and then the item's current value is looked up live.
        has_to = "to" in change
        to_id = _option_id(data, "changes.field_value.to")
        if has_to and to_id is None:
            return Ignored(reason=f"the {self.board.status_field} field was cleared")
        cached = self.graphql.cached_field(field_id)
        if cached is not None and not self._is_status(cached.name):
            return Ignored(reason=f"field {cached.name!r} changed, not {self.board.status_field!r}")
        field_, item = await self.graphql.resolve(field_id, item_id, fresh_item=not has_to)
        if not self._is_status(field_.name):
            return Ignored(reason=f"field {field_.name!r} changed, not {self.board.status_field!r}")
        if to_id is None:
            to_column = item.values.get(field_id)
            if to_column is None:
                return Ignored(reason=f"the {self.board.status_field} field was cleared")
        else:
            if to_id not in field_.options:  # an option added since the field was cached
                field_, item = await self.graphql.resolve(field_id, item_id, fresh_field=True)
            to_column = field_.options.get(to_id) or opt_str(change, "to.name")
            if to_column is None:  # GitHub was just asked afresh: the payload names an option that is not there
                raise bad(f"changes.field_value.to.id {short(to_id)} is not an option of field {field_.name!r}")
        from_id = _option_id(data, "changes.field_value.from")
        from_column = (field_.options.get(from_id) or opt_str(change, "from.name")) if from_id else None
        linked = item.content_type in ("Issue", "PullRequest") and item.repo and item.number is not None
        return [event(
            board_uid=(item.node_id or _linked_content(data)) if linked else None,
            board_item=item_id if linked and _NODE_ID.fullmatch(item_id) else None,
            kind="transition", board=self.name, tenant=self._tenant(data),
            card_id=f"{item.repo}#{item.number}" if linked else item_id,
            delivery_id=delivery, from_column=from_column, to_column=to_column,
            stage=self.board.stage_for(to_column), title=item.title, body=item.body, url=item.url,
            repo=item.repo, branch=item.branch, actor=opt_str(data, "sender.login"),
        )]

    async def _item_gone(self, headers: Mapping[str, str], data: dict[str, Any], action: str) -> list[BoardEvent]:
        """The item was archived or deleted: its card is the content's "<owner>/<repo>#<number>"
        as a move named it, or the item's own id for a draft (or content GitHub no longer has)."""
        item_id = req_str(data, "projects_v2_item.node_id")
        delivery = self._delivery(headers)
        card_id = item_id
        uid = _linked_content(data)
        cached = self.graphql.items.get(item_id)
        if cached is not None and cached.content_type in ("Issue", "PullRequest") and cached.repo \
                and cached.number is not None:
            card_id = f"{cached.repo}#{cached.number}"
        elif opt_str(data, "projects_v2_item.content_type") in ("Issue", "PullRequest"):
            found = await self.graphql.content(req_str(data, "projects_v2_item.content_node_id"))
            if found is not None:
                card_id = f"{found[0]}#{found[1]}"
        held = card_id != item_id and _NODE_ID.fullmatch(item_id) is not None   # an issue's or PR's card
        return [event(kind="archive", board=self.name, tenant=self._tenant(data), card_id=card_id,
                      delivery_id=delivery, actor=opt_str(data, "sender.login"), board_uid=uid,
                      board_item=item_id if held else None,
                      gone="archived" if action == "archived" else "deleted")]

    # -- issue_comment ---------------------------------------------------------------------------

    async def _issue_comment(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        action = opt_str(data, "action")
        if action != "created":
            return Ignored(reason=f"issue_comment {short(action)}: cardloop acts on new comments only")
        author_type = opt_str(data, "comment.user.type")
        author = opt_str(data, "comment.user.login") or opt_str(data, "sender.login")
        if author_type == "Bot":
            # cardloop's own replies arrive as bot comments; feeding them back would loop.
            return Ignored(reason=f"comment by bot {short(author)}")
        text = opt_str(data, "comment.body")
        if not text or not text.strip():
            return Ignored(reason="empty comment")
        repo = req_str(data, "repository.full_name")
        number = req_int(data, "issue.number")
        return [event(
            kind="comment", board=self.name, tenant=self._tenant(data), card_id=f"{repo}#{number}",
            delivery_id=self._delivery(headers), title=opt_str(data, "issue.title"),
            url=opt_str(data, "issue.html_url"), repo=repo, actor=author, comment=text,
            board_uid=_node_id(data, "issue.node_id"),
        )]

    # -- issues ----------------------------------------------------------------------------------

    async def _issues(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        """An issue transferred to another repository: GitHub sends `transferred` from the old
        repository (changes.new_issue, changes.new_repository) and `opened` from the new one
        (changes.old_issue, changes.old_repository). Either one is the same edit of the card: it
        names the new issue, and the old one as its former id. Other issue actions are the
        project board's business (moves arrive as projects_v2_item)."""
        action = opt_str(data, "action")
        if action == "transferred":
            old, old_repo, new, new_repo = "issue", "repository", "changes.new_issue", "changes.new_repository"
        elif action == "opened" and opt_obj(data, "changes.old_issue") is not None:
            old, old_repo, new, new_repo = "changes.old_issue", "changes.old_repository", "issue", "repository"
        else:
            return Ignored(reason=f"issues {short(action)}: cardloop acts on issues transferred to another "
                                  "repository (moves arrive as projects_v2_item)")
        repo = req_str(data, f"{new_repo}.full_name")
        was = f"{req_str(data, f'{old_repo}.full_name')}#{req_int(data, f'{old}.number')}"
        return [event(
            kind="edit", board=self.name, tenant=self._tenant(data), card_id=f"{repo}#{req_int(data, f'{new}.number')}",
            delivery_id=self._delivery(headers), title=opt_str(data, f"{new}.title"),
            body=opt_str(data, f"{new}.body"), url=opt_str(data, f"{new}.html_url"), repo=repo, repo_moved=True,
            actor=opt_str(data, "sender.login"), board_uid=_node_id(data, f"{new}.node_id"), was=(was,),
        )]

    # -- repository ------------------------------------------------------------------------------

    async def _repository(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        """A repository renamed (changes.repository.name.from) or moved to another owner
        (changes.owner.from.organization or .user): `repository.full_name` is its name now. One
        event for the whole repository: the route names its cards anew (store.rename_repository)."""
        action = opt_str(data, "action")
        if action not in ("renamed", "transferred"):
            return Ignored(reason=f"repository {short(action)}: cardloop acts on repositories renamed or "
                                  "transferred to another owner")
        new = req_str(data, "repository.full_name")
        if not _FULL_NAME.fullmatch(new):
            raise bad(f"repository.full_name {short(new)} is not owner/name")
        owner, name = new.split("/")
        if action == "renamed":
            old = f"{owner}/{req_str(data, 'changes.repository.name.from')}"
        else:
            former = opt_str(data, "changes.owner.from.organization.login") \
                or opt_str(data, "changes.owner.from.user.login")
            if former is None:
                raise bad("changes.owner.from names neither an organization nor a user (its login)")
            old = f"{former}/{name}"
        if not _FULL_NAME.fullmatch(old):
            raise bad(f"the repository's former name {short(old)} is not owner/name")
        if old == new:
            return Ignored(reason=f"repository {new} kept its name")
        return [event(kind="repository", board=self.name, tenant=self._tenant(data), card_id=new,
                      delivery_id=self._delivery(headers), repo=new, was=(old,),
                      actor=opt_str(data, "sender.login"))]

    # -- workflow_run / check_suite --------------------------------------------------------------

    async def _workflow_run(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        action = opt_str(data, "action")
        if action != "completed":
            return Ignored(reason=f"workflow_run {short(action)}: cardloop acts on completed runs")
        run = req_obj(data, "workflow_run")
        name = opt_str(run, "name") or opt_str(data, "workflow.name") or opt_str(run, "path") or "workflow"
        number = opt_int(run, "run_number")
        label = f"GitHub Actions workflow {short(name)}" + (f" run #{number}" if number is not None else "")
        return self._build_failed(headers, data, run, label, opt_str(run, "html_url"))

    async def _check_suite(self, headers: Mapping[str, str], data: dict[str, Any]) -> list[BoardEvent] | Ignored:
        action = opt_str(data, "action")
        if action != "completed":
            return Ignored(reason=f"check_suite {short(action)}: cardloop acts on completed suites")
        suite = req_obj(data, "check_suite")
        app = opt_str(suite, "app.name")
        label = "check suite" + (f" of {short(app)}" if app else "")
        sha, repo_url = opt_str(suite, "head_sha"), opt_str(data, "repository.html_url")
        return self._build_failed(headers, data, suite, label,
                                  f"{repo_url}/commit/{sha}/checks" if sha and repo_url else None)

    def _build_failed(self, headers: Mapping[str, str], data: dict[str, Any], run: dict[str, Any], label: str,
                      url: str | None) -> list[BoardEvent] | Ignored:
        conclusion = opt_str(run, "conclusion")
        if conclusion not in FAILED_CONCLUSIONS:
            return Ignored(reason=f"{label} concluded {short(conclusion)}, not a failure")
        stage = self.board.failure_stage
        if not stage:
            return Ignored(reason="boards.github.failure_stage is empty: build failures are not acted on")
        repo = req_str(data, "repository.full_name")
        branch = opt_str(run, "head_branch")
        cards: list[str] = []
        for i, pr in enumerate(opt_list(run, "pull_requests")):
            if not isinstance(pr, dict):
                raise bad(f"pull_requests.{i} must be an object")
            # The PR lives in its base repository; the run may be in another (a fork's head).
            card = f"{_repo_from_api_url(opt_str(pr, 'base.repo.url')) or repo}#{req_int(pr, 'number')}"
            if card not in cards:
                cards.append(card)
        if not cards:
            return Ignored(reason=f"no pull request is linked to branch {short(branch)}")
        delivery = self._delivery(headers)
        sha = opt_str(run, "head_sha")
        note = (f"{label} concluded {conclusion} on branch {branch or '?'}"
                + (f" at {sha[:12]}" if sha else "") + (f": {url}" if url else ""))
        return [event(
            kind="build_failed", board=self.name, tenant=self._tenant(data), card_id=card,
            # one delivery may fail several PRs: each event gets its own id so dedup keeps them all
            delivery_id=delivery if len(cards) == 1 else f"{delivery}/{card}",
            stage=stage, url=url, repo=repo, branch=branch, actor=opt_str(data, "sender.login"), comment=note,
        ) for card in cards]


def _node_id(data: dict[str, Any], path: str) -> str | None:
    """An issue's or pull request's node id at `path`; None when absent or not one (the event is
    then answered by its "<owner>/<repo>#<number>" alone, as before)."""
    try:
        value = lookup(data, path)
    except WebhookError:   # a step on the way is not an object: nothing there
        return None
    return value if isinstance(value, str) and _NODE_ID.fullmatch(value) else None


def _linked_content(data: dict[str, Any]) -> str | None:
    """A project item payload's content_node_id when it says the item holds an issue or a pull
    request (a draft's node id is no issue's); None, never an error, when it says anything else."""
    try:
        content_type = lookup(data, "projects_v2_item.content_type")
    except WebhookError:
        return None
    if content_type not in ("Issue", "PullRequest"):
        return None
    return _node_id(data, "projects_v2_item.content_node_id")


def _option_id(data: dict[str, Any], path: str) -> str | None:
    """The option id of a single-select change's `from`/`to`: an object {id, name, ...}, or null."""
    value = lookup(data, path)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad(f"{path} must be an object for a single-select field")
    return req_str(data, f"{path}.id")
