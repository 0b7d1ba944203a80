"""Loopback fakes of the five boards' write APIs, speaking their real request and response
shapes: GitHub (REST issue comments and labels as PyGithub and httpx send them; GraphQL
projectItems / updateProjectV2ItemFieldValue), Linear (GraphQL issue / commentCreate /
issueUpdate), Jira Cloud (REST v3 comments with ADF bodies, transitions, labels), Trello (REST
card actions, lists, labels) and a generic webhook receiver. Each keeps the board's state
(comments, column, labels), checks the credential as the board does (401 otherwise), and can
be told to fail: a status with headers, a number of times, optionally *after* applying the
write (a reply lost on the way back, as when a worker dies mid-call)."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COLUMNS = ["Todo", "Planning", "In Progress", "In Review", "Testing", "Fixing", "Done", "Blocked"]


@dataclass
class Failure:
    pattern: re.Pattern[str]  # matched against "METHOD path" (and the GraphQL operation's text)
    status: int
    body: Any
    headers: dict[str, str]
    times: int
    after: bool  # apply the write first, then answer the failure


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw: bytes
    at: float


@dataclass
class Board:
    """One card's state on a fake board, plus what was asked of it."""

    token: str
    column: str = "Todo"
    comments: list[str] = field(default_factory=list)
    # comments[i] was written by someone other than cardloop's account: authors[i] names them
    authors: dict[int, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    moves: list[str] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A write matching `stall` is applied, then its answer waits for `release` (a worker killed
    # while its request is in flight): `stalled` is set once the write has been applied.
    stall: re.Pattern[str] | None = None
    stalled: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    # Called with each request before the board applies it, outside its lock: a test holds back a
    # request it picks by content (one comment of several) until the moment it wants.
    arrive: Callable[[Request], None] | None = None

    def fail(self, pattern: str, status: int, body: Any = None, headers: dict[str, str] | None = None,
             times: int = 1, after: bool = False) -> None:
        self.failures.append(Failure(re.compile(pattern), status, body if body is not None else {"message": "no"},
                                     headers or {}, times, after))

    def add_comment(self, text: str, *, author: str) -> None:
        """A comment by someone else (a person, another integration), as the board stores it."""
        with self.lock:
            self.authors[len(self.comments)] = author
            self.comments.append(text)

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET" and not _is_read(r)]


def _is_read(r: Request) -> bool:
    return isinstance(r.body, dict) and isinstance(r.body.get("query"), str) and \
        r.body["query"].lstrip().startswith("query")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave as separate writes: no 40 ms delayed-ACK stall

    def log_message(self, *_: object) -> None:
        pass

    def _reply(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        raw = b"" if status == 204 else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        try:
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client is gone (a worker killed mid-request): as a real server, drop the answer

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        board = self.server.board
        parts = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(parts.query).items()}
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ctype = self.headers.get("Content-Type", "")
        body: Any = None
        if raw and "json" in ctype:
            body = json.loads(raw)
        elif raw:
            body = {k: v[-1] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
        req = Request(method, parts.path, query, {k.lower(): v for k, v in self.headers.items()}, body, raw,
                      time.monotonic())
        if board.arrive is not None:
            board.arrive(req)
        with board.lock:
            board.requests.append(req)
            what = f"{method} {parts.path} " + (body.get("query", "") if isinstance(body, dict) else "")
            failure = next((f for f in board.failures if f.times and f.pattern.search(what)), None)
            if failure is not None:
                failure.times -= 1
            if not self.server.authorized(req):
                return self._reply(401, self.server.unauthorized())
            if failure is not None and not failure.after:
                return self._reply(failure.status, failure.body, failure.headers)
            status, data, headers = self.server.answer(req)
            if failure is not None:
                return self._reply(failure.status, failure.body, failure.headers)
            hold = board.stall is not None and board.stall.search(what) and not board.stalled.is_set()
            if hold:
                board.stalled.set()
        if hold:
            board.release.wait(60)
        self._reply(status, data, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, board: Board) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.board = board

    def authorized(self, req: Request) -> bool:
        raise NotImplementedError

    def unauthorized(self) -> Any:
        return {"message": "Unauthorized"}

    def answer(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        raise NotImplementedError


# -- GitHub ------------------------------------------------------------------------------------

REPO, NUMBER = "acme/payments-api", 142
PROJECT, ITEM, FIELD = "PVT_kwDOBM", "PVTI_lADOBM", "PVTSSF_lADOBM"


class GitHubServer(_Server):
    def authorized(self, req: Request) -> bool:
        return req.headers.get("authorization", "") in (f"token {self.board.token}", f"Bearer {self.board.token}")

    def unauthorized(self) -> Any:
        return {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}

    def comment_json(self, cid: int, body: str) -> dict[str, Any]:
        api = self.board.url
        author = self.board.authors.get(cid - 1)
        user = {"login": author, "id": 501, "type": "User"} if author else \
            {"login": "cardloop-bot", "id": 9, "type": "Bot"}
        return {"id": cid, "node_id": f"IC_{cid}", "url": f"{api}/repos/{REPO}/issues/comments/{cid}",
                "html_url": f"https://github.com/{REPO}/issues/{NUMBER}#issuecomment-{cid}", "body": body,
                "user": user,
                "created_at": "2026-11-25T10:00:00Z", "updated_at": "2026-11-25T10:00:00Z"}

    def answer(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        b = self.board
        base = {"x-ratelimit-remaining": "4999", "x-ratelimit-reset": str(int(time.time()) + 3600)}
        if req.path == "/graphql":
            return 200, self.graphql(req.body), base
        issue = f"/repos/{REPO}/issues/{NUMBER}"
        if req.path == "/user" and req.method == "GET":  # whose token this is
            return 200, {"login": "cardloop-bot", "id": 9, "type": "Bot"}, base
        if req.path == f"{issue}/comments" and req.method == "GET":
            return 200, [self.comment_json(i + 1, c) for i, c in enumerate(b.comments)], base
        if req.path == f"{issue}/comments" and req.method == "POST":
            b.comments.append(req.body["body"])
            return 201, self.comment_json(len(b.comments), req.body["body"]), base
        if (m := re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", req.path)) and req.method == "PATCH":
            b.comments[int(m.group(1)) - 1] = req.body["body"]
            return 200, self.comment_json(int(m.group(1)), req.body["body"]), base
        if req.path == f"{issue}/labels" and req.method == "GET":
            return 200, [{"id": i, "name": n, "color": "ededed"} for i, n in enumerate(b.labels)], base
        if req.path.startswith(f"{issue}/labels/") and req.method == "DELETE":
            name = urllib.parse.unquote(req.path.rsplit("/", 1)[1])
            if name not in b.labels:
                return 404, {"message": "Label does not exist"}, base
            b.labels.remove(name)
            return 200, [{"id": i, "name": n, "color": "ededed"} for i, n in enumerate(b.labels)], base
        if req.path == f"{issue}/labels" and req.method == "POST":
            b.labels += [x for x in req.body["labels"] if x not in b.labels]
            return 200, [{"id": i, "name": n, "color": "ededed"} for i, n in enumerate(b.labels)], base
        return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, base

    def graphql(self, body: dict[str, Any]) -> dict[str, Any]:
        b, q, v = self.board, body["query"], body.get("variables") or {}
        options = [{"id": f"opt{i}", "name": n} for i, n in enumerate(COLUMNS)]
        if "updateProjectV2ItemFieldValue" in q:
            if (v["project"], v["item"], v["field"]) != (PROJECT, ITEM, FIELD):
                return {"data": None, "errors": [{"type": "NOT_FOUND", "message": "Could not resolve to a node"}]}
            chosen = next((o["name"] for o in options if o["id"] == v["option"]), None)
            if chosen is None:
                return {"data": None, "errors": [{"message": "The option id does not belong to the field"}]}
            b.column = chosen
            b.moves.append(chosen)
            return {"data": {"updateProjectV2ItemFieldValue": {"projectV2Item": {"id": ITEM}}}}
        if "issueOrPullRequest" in q:
            if (f"{v['owner']}/{v['name']}", v["number"]) != (REPO, NUMBER):
                return {"data": {"repository": None}, "errors": [
                    {"type": "NOT_FOUND", "path": ["repository"], "message": "Could not resolve to a Repository"}]}
            item = {"id": ITEM, "project": {"id": PROJECT, "title": "Payments",
                                            "field": {"id": FIELD, "options": options}},
                    "fieldValueByName": {"name": b.column, "optionId": f"opt{COLUMNS.index(b.column)}"}}
            return {"data": {"repository": {"issueOrPullRequest": {"projectItems": {"nodes": [item]}}}}}
        return {"errors": [{"message": "unexpected query"}]}


# -- Linear ------------------------------------------------------------------------------------

LINEAR_ISSUE, LINEAR_ID = "ENG-42", "9cfb482a-81e3-4154-b5b9-2c805e70a02d"
LINEAR_STATES = ["Todo", "In Progress", "In Review", "Testing", "Done", "Blocked"]
LINEAR_LABELS = ["Bug", "cardloop: blocked"]
LINEAR_ME = "user-cardloop"  # the API key's user (viewer)


class LinearServer(_Server):
    def authorized(self, req: Request) -> bool:
        return req.headers.get("authorization") == self.board.token

    def unauthorized(self) -> Any:
        return {"errors": [{"message": "Authentication required, not authenticated",
                            "extensions": {"type": "authentication error", "code": "AUTHENTICATION_ERROR"}}]}

    def answer(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        b, q, v = self.board, req.body["query"], req.body.get("variables") or {}
        states = [{"id": f"state-{i}", "name": n} for i, n in enumerate(LINEAR_STATES)]
        labels = [{"id": f"label-{i}", "name": n} for i, n in enumerate(LINEAR_LABELS)]
        if "commentCreate" in q:
            if v["issueId"] != LINEAR_ID:
                return 200, {"data": None, "errors": [{"message": "Entity not found",
                                                       "extensions": {"code": "ENTITY_NOT_FOUND"}}]}, {}
            b.comments.append(v["body"])
            return 200, {"data": {"commentCreate": {"success": True, "comment": {"id": f"c{len(b.comments)}"}}}}, {}
        if "issueUpdate" in q:
            inp = v["input"]
            if "stateId" in inp:
                b.column = next(s["name"] for s in states if s["id"] == inp["stateId"])
                b.moves.append(b.column)
            if "labelIds" in inp:
                b.labels = [x["name"] for x in labels if x["id"] in inp["labelIds"]]
            return 200, {"data": {"issueUpdate": {"success": True, "issue": {"id": LINEAR_ID,
                                                                              "state": {"name": b.column}}}}}, {}
        if "issue(id:" in q.replace(" ", ""):
            if v["id"] not in (LINEAR_ISSUE, LINEAR_ID):
                return 200, {"data": None, "errors": [{"message": "Entity not found: Issue",
                                                       "extensions": {"code": "ENTITY_NOT_FOUND"}}]}, {}
            return 200, {"data": {"issue": {
                "id": LINEAR_ID, "identifier": LINEAR_ISSUE,
                "state": next(s for s in states if s["name"] == b.column),
                "labels": {"nodes": [x for x in labels if x["name"] in b.labels]},
                "team": {"id": "team-1", "states": {"nodes": states}, "labels": {"nodes": labels}},
                "comments": {"nodes": [{"id": f"c{i}", "body": c, "user": {"id": b.authors.get(i, LINEAR_ME)}}
                                       for i, c in enumerate(b.comments)]}},
                "viewer": {"id": LINEAR_ME}}}, {}
        return 400, {"errors": [{"message": "unexpected query"}]}, {}


# -- Jira --------------------------------------------------------------------------------------

JIRA_ISSUE = "PAY-7"
JIRA_FLOW = ["To Do", "In Progress", "In Review", "Testing", "Done", "Blocked"]
JIRA_ME = "5b10ac8d82e05b22cc7d4ef5"  # the credential's account id (GET /myself)


def adf_plain(doc: dict[str, Any]) -> str:
    out = []
    for para in doc.get("content", []):
        out.append("".join(n.get("text", "\n") for n in para.get("content", [])))
    return "\n\n".join(out)


class JiraServer(_Server):
    def authorized(self, req: Request) -> bool:
        import base64
        return req.headers.get("authorization") == "Basic " + base64.b64encode(self.board.token.encode()).decode()

    def unauthorized(self) -> Any:
        return {"errorMessages": ["Client must be authenticated to access this resource."], "errors": {}}

    def answer(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        b = self.board
        issue = f"/rest/api/3/issue/{JIRA_ISSUE}"
        if req.path == "/rest/api/3/myself" and req.method == "GET":
            return 200, {"accountId": JIRA_ME, "accountType": "atlassian", "displayName": "cardloop"}, {}
        if not req.path.startswith(issue):
            return 404, {"errorMessages": ["Issue does not exist or you do not have permission to see it."],
                         "errors": {}}, {}
        if req.path == f"{issue}/comment" and req.method == "GET":
            start, most = int(req.query.get("startAt", 0)), int(req.query.get("maxResults", 50))
            page = b.comments[start:start + most]
            return 200, {"startAt": start, "maxResults": most, "total": len(b.comments),
                         "comments": [{"id": str(10000 + start + i), "body": json.loads(c),
                                       "author": {"accountId": b.authors.get(start + i, JIRA_ME)}}
                                      for i, c in enumerate(page)]}, {}
        if req.path == f"{issue}/comment" and req.method == "POST":
            doc = req.body["body"]
            assert doc["type"] == "doc" and doc["version"] == 1
            b.comments.append(json.dumps(doc))
            return 201, {"id": str(10000 + len(b.comments) - 1), "body": doc}, {}
        if req.path == f"{issue}/transitions" and req.method == "GET":
            return 200, {"expand": "transitions", "transitions": [
                {"id": str(11 + i), "name": f"Move to {n}", "to": {"id": str(i + 1), "name": n},
                 "hasScreen": False, "isAvailable": True} for i, n in enumerate(JIRA_FLOW) if n != b.column]}, {}
        if req.path == f"{issue}/transitions" and req.method == "POST":
            b.column = JIRA_FLOW[int(req.body["transition"]["id"]) - 11]
            b.moves.append(b.column)
            return 204, None, {}
        if req.path == issue and req.method == "GET":
            return 200, {"id": "10042", "key": JIRA_ISSUE, "fields": {
                "status": {"name": b.column, "id": str(JIRA_FLOW.index(b.column) + 1)}, "labels": list(b.labels)}}, {}
        if req.path == issue and req.method == "PUT":
            for op in req.body["update"]["labels"]:
                if op.get("add") and op["add"] not in b.labels:
                    b.labels.append(op["add"])
                if op.get("remove") in b.labels:
                    b.labels.remove(op["remove"])
            return 204, None, {}
        return 404, {"errorMessages": ["not found"], "errors": {}}, {}


# -- Trello ------------------------------------------------------------------------------------

TRELLO_CARD, TRELLO_BOARD = "rE4cW9vC", "5f3a1b2c3d4e5f6a7b8c9d0e"
TRELLO_LISTS = ["To Do", "Doing", "Review", "Testing", "Done", "Blocked"]
TRELLO_LABELS = ["cardloop: blocked", "urgent"]
TRELLO_ME = "5a1b2c3d4e5f6a7b8c9d0e1f"  # the token's member (GET /members/me)


class TrelloServer(_Server):
    def authorized(self, req: Request) -> bool:
        key, token = self.board.token.split(":")
        return req.headers.get("authorization") == f'OAuth oauth_consumer_key="{key}", oauth_token="{token}"'

    def answer(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        b = self.board
        lists = [{"id": f"list{i}", "name": n} for i, n in enumerate(TRELLO_LISTS)]
        labels = [{"id": f"label{i}", "name": n} for i, n in enumerate(TRELLO_LABELS)]
        card = f"/1/cards/{TRELLO_CARD}"
        if req.path == "/1/members/me" and req.method == "GET":
            return 200, {"id": TRELLO_ME, "username": "cardloop"}, {}
        if req.path == f"{card}/actions" and req.method == "GET":
            assert req.query.get("filter") == "commentCard"
            return 200, [{"id": f"a{i}", "type": "commentCard", "data": {"text": c},
                          "idMemberCreator": b.authors.get(i, TRELLO_ME)}
                         for i, c in reversed(list(enumerate(b.comments)))], {}
        if req.path == f"{card}/actions/comments" and req.method == "POST":
            b.comments.append(req.body["text"])
            return 200, {"id": f"a{len(b.comments)}", "type": "commentCard", "data": {"text": req.body["text"]}}, {}
        if req.path == card and req.method == "GET":
            return 200, {"id": "5f3a1b2c3d4e5f6a7b8c9d11", "shortLink": TRELLO_CARD, "idBoard": TRELLO_BOARD,
                         "idList": f"list{TRELLO_LISTS.index(b.column)}",
                         "idLabels": [x["id"] for x in labels if x["name"] in b.labels]}, {}
        if req.path == card and req.method == "PUT":
            b.column = TRELLO_LISTS[int(req.body["idList"].removeprefix("list"))]
            b.moves.append(b.column)
            return 200, {"id": "5f3a1b2c3d4e5f6a7b8c9d11", "idList": req.body["idList"]}, {}
        if req.path == f"/1/boards/{TRELLO_BOARD}/lists":
            return 200, lists, {}
        if req.path == f"/1/boards/{TRELLO_BOARD}/labels":
            return 200, labels, {}
        if req.path.startswith(f"{card}/idLabels/") and req.method == "DELETE":
            b.labels.remove(TRELLO_LABELS[int(req.path.rsplit("/", 1)[1].removeprefix("label"))])
            return 200, {"_value": None}, {}
        if req.path == f"{card}/idLabels" and req.method == "POST":
            b.labels.append(TRELLO_LABELS[int(req.body["value"].removeprefix("label"))])
            return 200, [req.body["value"]], {}
        return 404, "The requested resource was not found.", {}


# -- generic -----------------------------------------------------------------------------------


class GenericServer(_Server):
    """Any receiver of the outgoing webhook: keeps each delivery once (by its id), as asked."""

    def authorized(self, req: Request) -> bool:
        import hashlib
        import hmac
        sig = "sha256=" + hmac.new(self.board.token.encode(), req.raw, hashlib.sha256).hexdigest()
        return hmac.compare_digest(req.headers.get("x-hub-signature-256", ""), sig)

    def answer(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        b, event = self.board, req.body
        seen = {json.loads(r.raw)["delivery_id"] for r in b.requests[:-1] if r.raw}
        if event["delivery_id"] in seen:
            return 200, {"status": "duplicate"}, {}
        if event["event"] == "comment":
            b.comments.append(event["text"])
        elif event["event"] == "move":
            b.column = event["to_column"]
            b.moves.append(b.column)
        elif event["event"] == "label":
            b.labels.append(event["label"])
        elif event["event"] == "unlabel" and event["label"] in b.labels:
            b.labels.remove(event["label"])
        return 202, {"status": "accepted"}, {}


SERVERS: dict[str, tuple[type[_Server], str, str]] = {
    # board: (server, credential as the variable holds it, the base path the client is given)
    "github": (GitHubServer, "ghp_" + "B" * 36, ""),
    "linear": (LinearServer, "lin_api_" + "k" * 40, "/graphql"),
    "jira": (JiraServer, "bot@acme.example:ATATT3xFfGF0" + "j" * 20, ""),
    "trello": (TrelloServer, "a" * 32 + ":" + "ATTA" + "t" * 60, "/1"),
    "generic": (GenericServer, "outgoing-" + "s" * 24, "/hooks/cardloop"),
}
START_COLUMN = {"github": "Todo", "linear": "Todo", "jira": "To Do", "trello": "To Do", "generic": "planning"}
CARD_ID = {"github": f"{REPO}#{NUMBER}", "linear": LINEAR_ISSUE, "jira": JIRA_ISSUE, "trello": TRELLO_CARD,
           "generic": "OPS-7"}


@contextmanager
def serving(name: str) -> Iterator[Board]:
    """The fake `name` board on loopback; board.url is the client's api_url."""
    cls, credential, base = SERVERS[name]
    board = Board(token=credential, column=START_COLUMN[name])
    server = cls(board)
    board.url = f"http://127.0.0.1:{server.server_address[1]}{base}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield board
    finally:
        server.shutdown()
        server.server_close()


def board_env(name: str, board: Board) -> dict[str, str]:
    """Config overrides that point cardloop's `name` board writes at the fake."""
    var = f"TEST_{name.upper()}_WRITE"
    env = {f"CARDLOOP_BOARDS__{name.upper()}__WRITE_TOKEN_ENV": var, var: board.token,
           f"CARDLOOP_BOARDS__{name.upper()}__API_URL": board.url}
    if name == "github":
        env |= {"CARDLOOP_BOARDS__GITHUB__GRAPHQL_URL": f"{board.url}/graphql"}
    return env
