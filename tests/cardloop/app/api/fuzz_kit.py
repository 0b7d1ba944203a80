"""What the API fuzz test (test_api_fuzz.py) draws requests from: every route's well-formed
request, the ways a client gets one wrong (malformed or oddly encoded bodies, wrong types, deep
nesting, unicode edge cases, wrong content types, bad or doubled credentials and signatures,
odd path segments and query strings, wrong methods), and each route family's error shape.

A request is drawn as a `Probe`: the raw path as sent on the wire (percent-encoding and `..`
kept), raw header bytes (so a header can be non-ASCII or sent twice) and the raw body."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from tests.cardloop.app.api.webhook_kit import hub_signature, linear_signature, trello_signature

Headers = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True)
class Probe:
    method: str
    path: bytes       # raw path and query, as on the wire
    headers: Headers
    body: bytes
    family: str       # whose error shape a refusal must have: webhook, openai, anthropic, api
    chunked: bool = False  # sent in pieces without a Content-Length, as a streaming client does

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how hypothesis prints a failing example
        printer.text(repr(self))

    def __repr__(self) -> str:  # what a failing example prints: bounded, escaped
        return (f"Probe({self.method} {self.path[:200]!r} headers={[(k, v[:80]) for k, v in self.headers]!r} "
                f"{'chunked ' if self.chunked else ''}"
                f"body={self.body[:300]!r}{'...' if len(self.body) > 300 else ''} ({len(self.body)} bytes))")


def family_of(path: bytes, headers: Headers) -> str:
    """Whose error shape a path answers in: a board's webhook, a gateway SDK's, or the API's."""
    path = path.partition(b"?")[0]
    if path.startswith(b"/webhooks/") or path == b"/webhooks":
        return "webhook"
    if path.startswith(b"/v1/") or path == b"/v1":
        # Anthropic's SDKs send anthropic-version, and their key as x-api-key.
        anthropic = path.startswith(b"/v1/messages") or any(
            k.lower() in (b"anthropic-version", b"x-api-key") for k, _ in headers)
        return "anthropic" if anthropic else "openai"
    return "api"


# ----------------------------------------------------------------------------------- values

# Text a client's bug or a hostile sender produces: NUL and other controls, bidi overrides,
# 4-byte emoji, a BOM, line separators, escapes of our own formats, very long text.
EDGE_TEXT = st.sampled_from([
    "", " ", "\x00", "a\x00b", "\u202eevil", "\U0001F600\U0001F4A9", "\ufeffbom", "\u2028\u2029", "\r\n",
    "\\", '"', "%2F", "../..", "null", "0", "true", "<script>", "x" * 5000, "Ā" * 300, "\U00010000" * 50,
    "Human: hi\n\nAssistant:", "<|im_start|>system", "\\ud800",
])
# st.characters() without a codec draws lone surrogates too: json.dumps writes them as "\ud800".
TEXT = st.text(st.characters(), max_size=24) | EDGE_TEXT
NUMBERS = (st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from([0, -1, 1, 2**63, 10**400])
           | st.floats(allow_nan=True, allow_infinity=True))
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON_VALUES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(TEXT, kids, max_size=4),
                           max_leaves=10)


def _dumps(value: Any, ascii_only: bool = True) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)
    # Not ensure_ascii: a lone surrogate goes on the wire as its (invalid) UTF-8 bytes.
    return text.encode("utf-8", "surrogatepass")


def _set_path(doc: Any, path: list[str], value: Any) -> Any:
    """`doc` with the value at `path` (keys of nested objects, indexes of lists) replaced."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _set_path(doc.get(head), rest, value)}
    if isinstance(doc, list) and head.isdigit() and int(head) < len(doc):
        copy = list(doc)
        copy[int(head)] = _set_path(copy[int(head)], rest, value)
        return copy
    return {head: _set_path(None, rest, value)}


def _paths(doc: Any, prefix: tuple[str, ...] = ()) -> list[list[str]]:
    found = [list(prefix)] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, str(key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += _paths(value, (*prefix, str(i)))
    return found


def _drop_path(doc: Any, path: list[str]) -> Any:
    if not path or not isinstance(doc, dict | list):
        return doc
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        if head not in doc:
            return doc
        return {k: v for k, v in doc.items() if k != head} if not rest else {**doc, head: _drop_path(doc[head], rest)}
    if head.isdigit() and int(head) < len(doc):
        copy = list(doc)
        if rest:
            copy[int(head)] = _drop_path(copy[int(head)], rest)
        else:
            del copy[int(head)]
        return copy
    return doc


# A value of another JSON type than the one a field expects is the commonest client bug: an
# object or a list where a string goes (unhashable: a set or dict lookup of it raises), a number
# for a string, null for a list.
CONTAINERS = st.lists(SCALARS, max_size=3) | st.dictionaries(TEXT, SCALARS, max_size=3)
REPLACEMENTS = CONTAINERS | SCALARS | JSON_VALUES


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """`base` with up to four of its values replaced by anything JSON can say, or removed, or a
    key added: wrong types, nulls, huge numbers, odd text, nested junk (sometimes none: the
    well-formed request must pass too)."""
    doc = base
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3, 4]))):
        paths = _paths(doc)
        action = draw(st.sampled_from(["set", "set", "set", "drop", "add"]))
        if action == "add" or not paths:
            doc = _set_path(doc, [draw(TEXT)], draw(REPLACEMENTS)) if isinstance(doc, dict) else doc
        elif action == "drop":
            doc = _drop_path(doc, draw(st.sampled_from(paths)))
        else:
            doc = _set_path(doc, draw(st.sampled_from(paths)), draw(REPLACEMENTS))
    return doc


def _nested(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@st.composite
def body_bytes(draw: st.DrawFn, base: Any, max_body: int, focused: bool = False) -> bytes:
    """A request body: mostly `base` mutated, else malformed, empty, deep, oversize or not JSON
    (`focused`: always JSON, only its values wrong)."""
    shape = "json" if focused else draw(st.sampled_from(
        ["json"] * 6 + ["raw-json", "dup-key", "junk", "empty", "deep", "oversize", "not-object", "truncated", "form",
                        "bom"]))
    doc = draw(mutated(base))
    if shape == "json":
        return _dumps(doc)
    if shape == "raw-json":
        return _dumps(doc, ascii_only=False)
    if shape == "dup-key" and isinstance(doc, dict) and doc:
        key = draw(st.sampled_from(sorted(doc, key=str)))
        text = _dumps(doc).decode()
        return (text[:-1] + ("," if len(doc) else "") + json.dumps(key) + ":" + _dumps(draw(JSON_VALUES)).decode()
                + "}").encode()
    if shape == "junk":
        return draw(st.binary(max_size=300))
    if shape == "empty":
        return b""
    if shape == "deep":
        return _nested(draw(st.sampled_from([100, 1_000, 5_000, 20_000])), draw(st.sampled_from(["list", "object"])))
    if shape == "oversize":
        return b'{"pad": "' + b"x" * (max_body + 10) + b'"}'
    if shape == "not-object":
        return _dumps(draw(st.lists(JSON_VALUES, max_size=3) | SCALARS))
    if shape == "truncated":
        raw = _dumps(doc)
        # Drawn apart from the body's length: a body's times change from one run to the next.
        return raw[: draw(st.integers(0, 2**16)) % max(len(raw), 1)]
    if shape == "form":
        return b"payload=" + quote(_dumps(doc)).encode()
    if shape == "bom":
        return b"\xef\xbb\xbf" + _dumps(doc)
    return _dumps(doc)


CONTENT_TYPES = st.sampled_from([b"application/json", b"application/json", b"application/json; charset=utf-8",
                                 b"text/plain", b"application/x-www-form-urlencoded", b"multipart/form-data",
                                 b"application/xml", b"", b"application/json; charset=latin-1", None])
# Path segments a client or a proxy can send: encoded slashes, dot segments, NUL, invalid UTF-8
# (a lone surrogate's bytes), bidi, emoji, very long, empty.
ODD_SEGMENTS = st.sampled_from([
    "acme%2Fother", "..", "%2e%2e", "..%2F..%2Fetc", "%00", "acme%00", "%ff%fe", "%ED%A0%80", "%E2%80%AE",
    "%F0%9F%98%80", "a" * 3000, "ACME", " ", "%20", "acme;x=1", "acme%3F", "%25", "-1", "0", "1e9",
    "99999999999999999999999", "default", "acme",
])


def segment() -> st.SearchStrategy[str]:
    return ODD_SEGMENTS | st.text(st.characters(), min_size=1, max_size=20).map(
        lambda s: quote(s.encode("utf-8", "surrogatepass"), safe=""))


# ----------------------------------------------------------------------------------- credentials

@dataclass(frozen=True)
class Tokens:
    tenant: str   # a bearer token of tenant acme
    other: str    # a bearer token of tenant globex
    admin: str


def _auth_headers(draw: st.DrawFn, tokens: Tokens, x_api_key: bool = False,
                  focused: bool = False) -> list[tuple[bytes, bytes]]:
    good = tokens.tenant.encode()
    choices = ["tenant", "tenant", "admin", "other", "none", "wrong", "empty", "scheme", "basic", "twice",
               "twice-bad-first", "non-ascii", "long", "spaces"]
    choices += ["x-api-key", "x-api-key-bad", "both"] if x_api_key else []
    choice = "tenant" if focused else draw(st.sampled_from(choices))
    return {
        "tenant": [(b"authorization", b"Bearer " + good)],
        "admin": [(b"authorization", b"Bearer " + tokens.admin.encode())],
        "other": [(b"authorization", b"Bearer " + tokens.other.encode())],
        "none": [],
        "wrong": [(b"authorization", b"Bearer cl_not-a-token")],
        "empty": [(b"authorization", b"Bearer ")],
        "scheme": [(b"authorization", good)],
        "basic": [(b"authorization", b"Basic " + good)],
        "twice": [(b"authorization", b"Bearer " + good), (b"authorization", b"Bearer " + good)],
        "twice-bad-first": [(b"authorization", b"Bearer nope"), (b"authorization", b"Bearer " + good)],
        "non-ascii": [(b"authorization", b"Bearer \xc3\xa9\xff\x00")],
        "long": [(b"authorization", b"Bearer " + b"a" * 20_000)],
        "spaces": [(b"authorization", b"  Bearer   " + good + b"  ")],
        "x-api-key": [(b"x-api-key", good)],
        "x-api-key-bad": [(b"x-api-key", b"\xff\xfe")],
        "both": [(b"x-api-key", b"wrong"), (b"authorization", b"Bearer " + good)],
    }[choice]


def _content_type(draw: st.DrawFn, focused: bool = False) -> list[tuple[bytes, bytes]]:
    kind = b"application/json" if focused else draw(CONTENT_TYPES)
    return [] if kind is None else [(b"content-type", kind)]


def _query(draw: st.DrawFn, focused: bool = False) -> bytes:
    return b"" if focused else draw(st.sampled_from([b"", b"", b"?", b"?a=1", b"?stream=true", b"?%ff=%fe",
                                                     b"?x=%00&x=%ED%A0%80", b"?" + b"q=" * 2000, b"?beta=true"]))


# ----------------------------------------------------------------------------------- gateway

OPENAI_BASE = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Say hi."}]}
ANTHROPIC_BASE = {"model": "claude-x", "max_tokens": 64, "system": "Be brief.",
                  "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}]}
# Every kind of part and turn each protocol carries (the sweep reaches each one's fields).
OPENAI_RICH = {
    "model": "gpt-4o", "max_completion_tokens": 32, "temperature": 0.5, "n": 1, "stream": False,
    "stream_options": {"include_usage": True}, "tools": [{"type": "function", "function": {"name": "f"}}],
    "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "name": "ana", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"q\": 1}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "user", "content": "Say hi."}]}
ANTHROPIC_RICH = {
    "model": "claude-x", "max_tokens": 32, "temperature": 0.2, "stream": False,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "metadata": {"user_id": "u1"}, "stop_sequences": ["END"],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "tool_use", "id": "tu_1", "name": "look", "input": {"q": 1}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "a cat"}],
             "is_error": False}]},
        {"role": "assistant", "content": "It is a cat."},
        {"role": "user", "content": "Say hi."}]}


@st.composite
def gateway_probes(draw: st.DrawFn, tokens: Tokens, max_body: int) -> Probe:
    protocol = draw(st.sampled_from(["openai", "anthropic"]))
    focused = draw(st.booleans())  # a well-formed request whose body's values are wrong
    path = b"/v1/chat/completions" if protocol == "openai" else b"/v1/messages"
    method = "POST" if focused else draw(st.sampled_from(["POST"] * 8 + ["GET", "PUT", "DELETE", "OPTIONS", "PATCH"]))
    rich = draw(st.booleans())
    base: dict[str, Any] = dict((OPENAI_RICH if rich else OPENAI_BASE) if protocol == "openai"
                                else (ANTHROPIC_RICH if rich else ANTHROPIC_BASE))
    if draw(st.booleans()):
        base["stream"] = True
    body = draw(body_bytes(base, max_body, focused))
    headers = (_auth_headers(draw, tokens, x_api_key=protocol == "anthropic", focused=focused)
               + _content_type(draw, focused))
    if protocol == "anthropic" and draw(st.booleans()):
        headers.append((b"anthropic-version", b"2023-06-01"))
    tail = b"" if focused else draw(st.sampled_from([b"", b"", b"", b"/", b"/extra", b"%2F..", b"/count_tokens"]))
    full = path + tail + _query(draw, focused)
    return Probe(method, full, tuple(headers), body, family_of(full, tuple(headers)), draw(st.booleans()))


# ----------------------------------------------------------------------------------- webhooks

def _iso_now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _generic(card: str) -> dict[str, Any]:
    return {"card_id": card, "to_column": "Backlog", "delivery_id": f"d-{card}", "title": f"Card {card}",
            "repo": "acme/payments-api", "comment": "Please look at this.", "timestamp": time.time()}


def _github(card: int) -> dict[str, Any]:
    return {"action": "created", "issue": {"number": card, "title": "Fix it", "html_url": "https://github.com/a/b/1"},
            "comment": {"body": "Looks wrong.", "user": {"login": "maria", "type": "User"},
                        "updated_at": _iso_now()},
            "repository": {"full_name": "acme/payments-api", "owner": {"login": "acme"}},
            "workflow_run": {"conclusion": "failure", "updated_at": _iso_now(), "head_branch": "card/x",
                             "pull_requests": [{"number": card}]},
            "sender": {"login": "maria"}}


def _jira(card: int) -> dict[str, Any]:
    return {"timestamp": int(time.time() * 1000), "webhookEvent": "jira:issue_updated",
            "issue": {"key": f"PAY-{card}", "self": "https://acme.atlassian.net/rest/api/2/issue/1",
                      "fields": {"summary": "Fix it", "description": "Why.", "project": {"key": "PAY"}}},
            "changelog": {"items": [{"field": "status", "fromString": "To Do", "toString": "Backlog"},
                                    {"field": "summary"}]},
            "comment": {"body": "Looks wrong.", "author": {"displayName": "Marco"}},
            "user": {"displayName": "Marco"}}


def _linear(card: int) -> dict[str, Any]:
    return {"type": "Issue", "action": "update", "webhookTimestamp": int(time.time() * 1000),
            "webhookId": "wh-1", "createdAt": _iso_now(), "organizationId": "org-1",
            "updatedFrom": {"stateId": "s-0", "title": "old"},
            "data": {"identifier": f"ENG-{card}", "title": "Fix it", "state": {"name": "Backlog"},
                     "updatedAt": _iso_now(), "url": f"https://linear.app/acme/issue/ENG-{card}/fix",
                     "issue": {"identifier": f"ENG-{card}"}, "body": "Looks wrong."},
            "actor": {"name": "Ana"}}


def _trello(card: int) -> dict[str, Any]:
    return {"action": {"id": f"act-{card}", "type": "updateCard", "date": _iso_now(),
                       "memberCreator": {"fullName": "Tom"},
                       "data": {"card": {"id": f"c{card}", "shortLink": f"sl{card}", "name": "Fix it", "desc": "Why."},
                                "listBefore": {"name": "To Do"}, "listAfter": {"name": "Backlog"},
                                "old": {"name": "old"}, "text": "Looks wrong.", "board": {"id": "b1"}}},
            "model": {"id": "b1"}}


Signer = Callable[[bytes], str]
BOARDS: dict[str, tuple[Callable[[int], dict[str, Any]], bytes, Signer]] = {
    "generic": (lambda n: _generic(f"FZ-{n}"), b"x-hub-signature-256", hub_signature),
    "github": (_github, b"x-hub-signature-256", hub_signature),
    "jira": (_jira, b"x-hub-signature", hub_signature),
    "linear": (_linear, b"linear-signature", linear_signature),
    "trello": (_trello, b"x-trello-webhook", trello_signature),
}
GITHUB_EVENTS = st.sampled_from([b"issue_comment", b"issues", b"workflow_run", b"check_suite", b"ping", b"push", b"",
                                 b"\xff", b"issue_comment, ping"])
JIRA_EVENTS = st.sampled_from(["jira:issue_updated", "comment_created", "jira:issue_deleted", "other"])
LINEAR_EVENTS = st.sampled_from([("Issue", "update"), ("Issue", "remove"), ("Comment", "create"), ("X", "y")])
TRELLO_EVENTS = st.sampled_from(["updateCard", "commentCard", "deleteCard", "createCard"])


@st.composite
def webhook_probes(draw: st.DrawFn, max_body: int) -> Probe:
    board = draw(st.sampled_from([*BOARDS] * 4 + ["unknown", "GitHub", "generic%2F..", "generic/", "..", "%00"]))
    board = board if board in BOARDS or not draw(st.booleans()) else "generic"
    make, header, sign = BOARDS.get(board, BOARDS["generic"])
    card = draw(st.integers(1, 40))
    base = make(card)
    if board == "jira":
        base["webhookEvent"] = draw(JIRA_EVENTS)
    elif board == "linear":
        base["type"], base["action"] = draw(LINEAR_EVENTS)
    elif board == "trello":
        base["action"]["type"] = draw(TRELLO_EVENTS)
    elif board == "generic":
        # An unmapped column (ignored), "done" (applied: its redelivery must not be), or none.
        column = draw(st.sampled_from(["Backlog", "done", None]))
        base = {k: v for k, v in base.items() if k != "to_column"} | ({"to_column": column} if column else {})
    focused = draw(st.booleans())  # a well-formed, signed delivery whose body's values are wrong
    body = draw(body_bytes(base, max_body, focused))
    signature = "valid" if focused else draw(st.sampled_from(
        ["valid"] * 5 + ["none", "wrong", "malformed", "twice", "twice-bad-first", "non-ascii", "other-scheme"]))
    good = sign(body).encode()
    headers: list[tuple[bytes, bytes]] = {
        "valid": [(header, good)], "none": [], "wrong": [(header, sign(body + b" ").encode())],
        "malformed": [(header, b"sha256=zz" + good[9:])], "twice": [(header, good), (header, good)],
        "twice-bad-first": [(header, b"sha256=" + b"0" * 64), (header, good)],
        "non-ascii": [(header, b"\xff" + good)], "other-scheme": [(header, b"sha1=" + good.split(b"=")[-1])],
    }[signature]
    if board == "github":
        headers += [(b"x-github-event", draw(GITHUB_EVENTS)), (b"x-github-delivery", f"gh-{card}".encode())]
    if board in ("generic", "linear", "jira") and draw(st.booleans()):
        name = {"generic": b"x-delivery-id", "linear": b"linear-delivery", "jira": b"x-atlassian-webhook-identifier"}
        headers.append((name[board], draw(st.sampled_from([b"h-1", b"", b"\xff\xfe", b"x" * 400]))))
    headers += _content_type(draw, focused)
    method = "POST" if focused else draw(st.sampled_from(["POST"] * 10 + ["GET", "PUT", "DELETE", "HEAD", "PATCH"]))
    path = b"/webhooks/" + board.encode() + _query(draw, focused)
    return Probe(method, path, tuple(headers), body, "webhook", draw(st.booleans()))


# ----------------------------------------------------------------------------------- tenants, cards, ops

PROMPT_BASE = {"custom_system_prompt": "Answer tersely; cite the style guide.", "override_mode": "append",
               "language_preference": "en", "tone_profile": {"style": "terse"}}
TENANT_ROUTES = [
    ("PUT", "/prompt", PROMPT_BASE), ("GET", "/prompt", None), ("DELETE", "/prompt", None),
    ("GET", "/prompt/versions", None), ("GET", "/prompt/versions/{n}", None),
    ("POST", "/prompt/rollback", {"version": 1}), ("POST", "/tokens", {"name": "ci"}), ("GET", "/tokens", None),
    ("DELETE", "/tokens/{n}", None), ("GET", "/limits", None),
]


@st.composite
def tenant_probes(draw: st.DrawFn, tokens: Tokens, max_body: int) -> Probe:
    method, suffix, base = draw(st.sampled_from(TENANT_ROUTES))
    focused = draw(st.booleans())  # the tenant's own well-formed request whose body's values are wrong
    if not focused and draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "HEAD"]))
    tenant = "acme" if focused else draw(st.sampled_from(["acme"] * 4 + ["globex"]) | segment())
    number = draw(st.sampled_from(["1", "2", "0", "-1", "abc", "1.5", "99999999999999999999", "%ff", "1%2F2"])
                  | segment())
    path = f"/tenants/{tenant}{suffix.replace('{n}', number)}".encode() + _query(draw, focused)
    body = (draw(body_bytes(base, max_body, focused)) if base is not None
            else draw(st.sampled_from([b"", b"", b"{}", b"\xff"])))
    # Tokens are the admin's to issue: a focused request uses the admin token there.
    admin = focused and "/tokens" in suffix
    headers = ([(b"authorization", b"Bearer " + tokens.admin.encode())] if admin
               else _auth_headers(draw, tokens, focused=focused)) + _content_type(draw, focused)
    return Probe(method, path, tuple(headers), body, "api", draw(st.booleans()))


@st.composite
def card_probes(draw: st.DrawFn, tokens: Tokens) -> Probe:
    action = draw(st.sampled_from([("GET", "prompt"), ("POST", "retry"), ("POST", "cancel")]))
    focused = draw(st.booleans())  # the tenant's own card (generic/FZ-1), its query drawn
    method = (action[0] if focused or draw(st.integers(0, 9))
              else draw(st.sampled_from(["GET", "POST", "PUT", "DELETE"])))
    card = "generic/FZ-1" if focused else "/".join(
        draw(st.lists(st.sampled_from(["generic", "FZ-1"]) | segment(), min_size=1, max_size=4)))
    query = b""
    if action[1] == "prompt":
        stage = draw(st.sampled_from(["coding", "planning", "", "CODING", "nope", "%00", "%ff", "coding&stage=review"]))
        iteration = draw(st.sampled_from(["", "&iteration=1", "&iteration=0", "&iteration=-5", "&iteration=abc",
                                          "&iteration=1e3", "&iteration=99999999999999999999999", "&iteration=%ff"]))
        query = draw(st.sampled_from([f"?stage={stage}{iteration}".encode(), b"", b"?iteration=2"]))
    path = f"/cards/{card}/{action[1]}".encode() + query
    headers = _auth_headers(draw, tokens, focused=focused) + _content_type(draw, focused)
    body = draw(st.sampled_from([b"", b"{}", b"[", b"\xff"]))
    return Probe(method, path, tuple(headers), body, "api")


@st.composite
def other_probes(draw: st.DrawFn) -> Probe:
    path = draw(st.sampled_from([b"/livez", b"/healthz", b"/openapi.json", b"/docs", b"/redoc", b"/metrics",
                                 b"/docs-assets/swagger-ui.css", b"/docs-assets/..%2F..%2Fetc%2Fpasswd",
                                 b"/docs-assets/%2e%2e/%2e%2e/config.toml", b"/docs-assets/%00", b"/", b"//",
                                 b"/v1", b"/v1/models", b"/v1/messages/count_tokens", b"/v1/completions",
                                 b"/webhooks", b"/webhooks/", b"/tenants", b"/tenants/", b"/cards", b"/%ff",
                                 b"/" + b"a" * 5000]))
    path += _query(draw)
    method = draw(st.sampled_from(["GET", "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE"]))
    headers: list[tuple[bytes, bytes]] = []
    if draw(st.booleans()):
        headers.append((b"anthropic-version", b"2023-06-01"))
    body = draw(st.sampled_from([b"", b"{}", b"\xff"]))
    return Probe(method, path, tuple(headers), body, family_of(path, tuple(headers)))


# ----------------------------------------------------------------------------------- the sweep

# Every field of every route's well-formed request, removed or replaced by a value of each JSON
# type (random mutation rarely hits one nested field with one type: a Jira changelog item's
# field as a list was a 500 that 1,000 drawn deliveries did not find).
WRONG_TYPES: list[Any] = [None, 7, "x", ["x"], {"k": "v"}]
# The deep run's further values: edge numbers, empty and odd text, nesting.
MORE_VALUES: list[Any] = [True, 0, -1, 1.5, 10**400, float("nan"), "", "\x00", "\ud800", "\u202e" * 3, "x" * 5000,
                          [], {}, [[["x"]]], {"k": {"k": ["x"]}}, [{"k": "v"}] * 3]


def field_sweep(base: Any, values: list[Any] = WRONG_TYPES) -> list[tuple[str, Any]]:
    """(what changed, the changed document) for every path of `base`."""
    variants = []
    for path in _paths(base):
        name = ".".join(path)
        variants.append((f"{name} removed", _drop_path(base, path)))
        variants += [(f"{name} = {value!r}", _set_path(base, path, value)) for value in values]
    return variants


def delivery(board: str, doc: Any, extra: Headers = ()) -> Probe:
    """`doc` delivered to /webhooks/<board>, signed as the board signs it."""
    _, header, sign = BOARDS[board]
    body = _dumps(doc)
    headers = ((header, sign(body).encode()), (b"content-type", b"application/json"), *extra)
    return Probe("POST", f"/webhooks/{board}".encode(), headers, body, "webhook")


def swept_deliveries(values: list[Any] = WRONG_TYPES) -> list[Probe]:
    """Each board's delivery of each kind cardloop acts on, every field swept."""
    probes: list[Probe] = []
    for event in (b"issue_comment", b"workflow_run", b"check_suite"):
        extra = ((b"x-github-event", event), (b"x-github-delivery", b"gh-sweep"))
        probes += [delivery("github", doc, extra) for _, doc in field_sweep(_github(7), values)]
    for name in ("jira:issue_updated", "comment_created", "jira:issue_deleted"):
        probes += [delivery("jira", doc) for _, doc in field_sweep({**_jira(7), "webhookEvent": name}, values)]
    for kind, action in (("Issue", "update"), ("Issue", "remove"), ("Comment", "create")):
        base = {**_linear(7), "type": kind, "action": action}
        probes += [delivery("linear", doc) for _, doc in field_sweep(base, values)]
    for name in ("updateCard", "commentCard", "deleteCard"):
        base = _trello(7)
        base["action"]["type"] = name
        probes += [delivery("trello", doc) for _, doc in field_sweep(base, values)]
    for column in ("Backlog", "done", None):
        base = {k: v for k, v in _generic("FZ-SWEEP").items() if k != "to_column"}
        base |= {"to_column": column} if column else {}
        probes += [delivery("generic", doc) for _, doc in field_sweep(base, values)]
    return probes


def swept_requests(tokens: Tokens, values: list[Any] = WRONG_TYPES) -> list[Probe]:
    """The gateway's and the tenant routes' well-formed requests, every field swept."""
    tenant = ((b"authorization", b"Bearer " + tokens.tenant.encode()), (b"content-type", b"application/json"))
    admin = ((b"authorization", b"Bearer " + tokens.admin.encode()), (b"content-type", b"application/json"))
    routes = [("POST", b"/v1/chat/completions", OPENAI_BASE, tenant, "openai"),
              ("POST", b"/v1/chat/completions", OPENAI_RICH, tenant, "openai"),
              ("POST", b"/v1/messages", ANTHROPIC_BASE, tenant, "anthropic"),
              ("POST", b"/v1/messages", ANTHROPIC_RICH, tenant, "anthropic"),
              ("PUT", b"/tenants/acme/prompt", PROMPT_BASE, tenant, "api"),
              ("POST", b"/tenants/acme/prompt/rollback", {"version": 1}, tenant, "api"),
              ("POST", b"/tenants/acme/tokens", {"name": "ci"}, admin, "api")]
    return [Probe(method, path, headers, _dumps(doc), family)
            for method, path, base, headers, family in routes for _, doc in field_sweep(base, values)]
