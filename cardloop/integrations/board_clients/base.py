"""One interface for writing a card's progress back to its board, and what every client shares.

    BoardClient.comment(card, body=, marker=)  find the comment carrying the marker, else post it
    BoardClient.move(card, column)             read the card's column first; move only when it differs
    BoardClient.label(card, label)             read the card's labels first; add the label when missing
    BoardClient.unlabel(card, label)           the same, removing it (a blocked card runs again)

This is the marker mechanism of the coding agent's GitHub comments (github_results.py:
`<!-- cardloop:{marker} -->` on a line of its own, looked for before anything is posted),
generalized to every board: each client renders the marker in its board's text (a hidden HTML
comment where the board keeps one, a plain last line where it does not), and the activity
around it is retried by Temporal, so every call finds what an earlier attempt made first.

Failures leave as UpstreamError: 401/403/404/410 and other 4xx final (the activity records them
on the card; they never fail a stage), 429/5xx/network retryable with the wait the board asked
for (Retry-After; GitHub's rate-limit reset; Linear's RATELIMITED with its reset header).
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx

from cardloop.integrations.upstream import UpstreamError, clamp_wait, lower_keys, retry_after_header

USER_AGENT = "cardloop"
MARKER_CHARS = re.compile(r"[A-Za-z0-9_.:/#@+=%-]{1,600}")
# A line that is a cardloop marker, hidden (`<!-- cardloop:... -->`) or plain (`cardloop:...`):
# what the inbound adapters look for to recognise our own comment coming back. A quoted line
# ("> cardloop:...", markdown's quote and how the Jira adapter renders an ADF blockquote) is not one.
MARKER_LINE = re.compile(r"\s*(?:<!--\s*cardloop:[A-Za-z0-9_.:/#@+=%-]+\s*-->|cardloop:[A-Za-z0-9_.:/#@+=%-]+)\s*")
_MARKER_WORD = re.compile(r"^(\s*(?:<!--\s*)?)cardloop:")
# Jira wiki markup (the body a Jira webhook sends) quotes between two of these, on lines of their own or not.
_WIKI_QUOTE = re.compile(r"\{quote\}", re.IGNORECASE)


@dataclass(frozen=True)
class BoardCard:
    """The card as the board knows it: its board id (decoded), link, repository and pull request."""

    board: str
    card_id: str
    url: str | None = None
    repo: str | None = None
    pull_request: str = ""  # the card's pull request URL, once it has one


@dataclass(frozen=True)
class Written:
    """What a write did, in words for the card's details: `acted` False when it was already so
    (the marker's comment found, the card already in the column, the label already on it)."""

    done: str
    acted: bool = True
    target: str = ""  # where: "owner/name#12", "ENG-42", "PROJ-7", a Trello card, the webhook URL


@runtime_checkable
class BoardClient(Protocol):
    board: str

    def comment(self, card: BoardCard, *, body: str, marker: str) -> Written: ...

    def move(self, card: BoardCard, column: str, *, key: str = "") -> Written: ...

    def label(self, card: BoardCard, label: str, *, key: str = "") -> Written: ...

    def unlabel(self, card: BoardCard, label: str, *, key: str = "") -> Written: ...

    def close(self) -> None: ...


def check_marker(marker: str) -> str:
    if not isinstance(marker, str) or not MARKER_CHARS.fullmatch(marker):
        raise ValueError(f"a marker is 1-600 characters of letters, digits and _.:/#@+=%-: {marker!r}")
    return marker


def plain_marker(marker: str) -> str:
    """The marker as a plain last line, for boards whose comments keep no hidden HTML."""
    return f"cardloop:{check_marker(marker)}"


def has_line(text: str | None, line: str) -> bool:
    return text is not None and any(x.strip() == line for x in text.splitlines())


def defuse_markers(text: str) -> str:
    """Lines of `text` that would read as a cardloop marker (a model's reply or the card quoting
    one) made plainly not one ("cardloop (quoted):..."): what cardloop posts then carries one
    marker, its own, and no later run finds another run's comment by a lookalike."""
    return "\n".join(_MARKER_WORD.sub(r"\1cardloop (quoted):", x, count=1) if MARKER_LINE.fullmatch(x) else x
                     for x in text.splitlines())


def with_line(body: str, line: str, limit: int) -> str:
    """`body` ending in the marker line once, cut to `limit` characters; other marker lines in
    it defused."""
    kept = defuse_markers("\n".join(x for x in body.splitlines() if x.strip() != line)).rstrip()
    room = limit - len(line) - 2
    if len(kept) > room:
        note = "\n\n[… cut to fit the board's limit …]"
        kept = kept[: max(room - len(note), 0)].rstrip() + note
    return f"{kept}\n\n{line}" if kept else line


def is_own_comment(text: str | None) -> bool:
    """True when a comment carries a cardloop marker line outside any quote: ours, coming back
    through a webhook. A person's reply quoting our comment, marker and all, is theirs (the
    answer to a blocked run's question often is one)."""
    return any(MARKER_LINE.fullmatch(line) for line in unquoted_lines(text or ""))


def unquoted_lines(text: str) -> list[str]:
    """The lines of a comment outside Jira's {quote} blocks (markdown's "> " lines are left as
    they are: a marker line never starts with ">")."""
    lines, quoted = [], False
    for line in text.splitlines():
        fences = len(_WIKI_QUOTE.findall(line))
        if not quoted and not fences:
            lines.append(line)
        quoted ^= fences % 2 == 1
    return lines


def same_name(a: str | None, b: str | None) -> bool:
    """Column, state, list and label names match case- and space-insensitively (as `columns` do)."""
    return a is not None and b is not None and " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


# -- HTTP --------------------------------------------------------------------------------------------


@dataclass
class Http:
    """A synchronous httpx client with retries off (Temporal owns them) whose failures are
    UpstreamErrors naming the board and what was being done, never the credential."""

    board: str
    base_url: str
    headers: Mapping[str, str]
    secret: str = ""
    timeout: float = 30.0
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.base_url.rstrip("/") if self.base_url else "",
                                   headers={"User-Agent": USER_AGENT, **self.headers}, timeout=self.timeout)

    def close(self) -> None:
        self.client.close()

    def call(self, method: str, url: str, doing: str, *, graphql: bool = False, **kw: Any) -> httpx.Response:
        try:
            # "": the base URL itself (a GraphQL endpoint, the webhook), not base + "/".
            resp = self.client.request(method, url or self.base_url, **kw)
        except httpx.TimeoutException:
            raise UpstreamError(f"{self.board} ({self._host()}) timed out while {doing}", kind="timeout",
                                retryable=True) from None
        except httpx.TransportError as exc:
            raise UpstreamError(f"cannot reach {self.board} ({self._host()}) while {doing}: {type(exc).__name__}",
                                kind="connection", retryable=True) from None
        if graphql and resp.status_code == 400 and "errors" in resp.text:
            return resp  # Linear answers GraphQL errors (its rate limit included) with a 400
        if resp.status_code >= 400:
            raise self.scrub(classify(self.board, resp.status_code, resp.headers, _message(resp), doing))
        return resp

    def json(self, method: str, url: str, doing: str, **kw: Any) -> Any:
        resp = self.call(method, url, doing, **kw)
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise UpstreamError(f"{self.board} answered {resp.status_code} without JSON while {doing}",
                                kind="bad_response", retryable=True, status=resp.status_code) from None

    def graphql(self, query: str, variables: dict[str, Any], doing: str, *, url: str = "") -> dict[str, Any]:
        """A GraphQL call's `data`; errors in a 200 answer are classified like HTTP ones."""
        data = self.json("POST", url, doing, graphql=True, json={"query": query, "variables": variables})
        if not isinstance(data, dict):
            raise UpstreamError(f"{self.board} GraphQL answered without an object while {doing}",
                                kind="bad_response", retryable=True)
        errors = data.get("errors")
        if errors:
            raise self.scrub(graphql_error(self.board, errors, doing))
        if not isinstance(data.get("data"), dict):
            raise UpstreamError(f"{self.board} GraphQL answered without data while {doing}", kind="bad_response",
                                retryable=True)
        return data["data"]

    def scrub(self, err: UpstreamError) -> UpstreamError:
        if self.secret and self.secret in err.message:
            return UpstreamError(err.message.replace(self.secret, "***"), kind=err.kind, retryable=err.retryable,
                                 status=err.status, retry_after=err.retry_after)
        return err

    def _host(self) -> str:
        return urllib.parse.urlsplit(self.base_url).netloc or self.base_url


def _message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:200].strip()
    if isinstance(data, dict):
        parts: list[str] = []
        for key in ("message", "error", "errorMessages", "errors"):
            value = data.get(key)
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, list):
                parts += [v if isinstance(v, str) else str(v.get("message", v)) if isinstance(v, dict) else str(v)
                          for v in value]
            elif isinstance(value, dict):
                parts += [f"{k}: {v}" for k, v in value.items()]
        return "; ".join(parts)[:500]
    return str(data)[:200]


# GitHub's hourly limit resets on a longer clock than Retry-After hints: wait up to an hour for it.
GITHUB_RESET_CAP = 3600.0


def rate_limit_wait(headers: Mapping[str, Any], *, now: float | None = None) -> float | None:
    """The wait a rate-limited answer asks for: Retry-After (seconds or a date), else a reset
    time (GitHub's x-ratelimit-reset in epoch seconds, Linear's x-ratelimit-requests-reset in ms)."""
    lowered = lower_keys(headers)
    asked = retry_after_header(lowered, now=now)
    if asked is not None:
        return clamp_wait(asked, floor=1.0)
    now = time.time() if now is None else now
    for name, scale in (("x-ratelimit-reset", 1.0), ("x-ratelimit-requests-reset", 0.001)):
        if lowered.get(name):
            try:
                reset = float(lowered[name]) * scale
            except ValueError:
                continue
            return clamp_wait(reset - now, cap=GITHUB_RESET_CAP, floor=1.0)
    return None


def classify(board: str, status: int, headers: Mapping[str, Any], message: str, doing: str) -> UpstreamError:
    """A board's error answer: 429 (and GitHub's 403 with its limit spent) and 408/409/5xx retry
    after the wait asked for; 401/403/404/410 and other 4xx are final, with the board's words."""
    detail = f"HTTP {status}" + (f": {message}" if message else "")
    lowered = lower_keys(headers)
    limited = status == 429 or (status == 403 and (lowered.get("x-ratelimit-remaining") == "0"
                                                   or "rate limit" in message.lower()))
    if limited:
        wait = rate_limit_wait(headers) or 60.0
        return UpstreamError(f"{board} rate limit reached while {doing} ({detail}); it asks to wait {wait:.0f} s",
                             kind="rate_limited", retryable=True, status=status, retry_after=wait)
    if status == 401:
        return UpstreamError(f"{board} rejected the credential while {doing} ({detail})", kind="auth",
                             retryable=False, status=status)
    if status == 403:
        return UpstreamError(f"{board} refused while {doing} ({detail}): the credential lacks a permission",
                             kind="auth", retryable=False, status=status)
    if status in (404, 410):
        return UpstreamError(f"not found on {board} while {doing} ({detail}): it does not exist or the credential "
                             "cannot see it", kind="not_found", retryable=False, status=status)
    if status in (408, 409) or status >= 500:
        kind = {408: "timeout", 409: "conflict"}.get(status, "server")
        return UpstreamError(f"{board} failed while {doing} ({detail})", kind=kind, retryable=True, status=status,
                             retry_after=clamp_wait(retry_after_header(headers), floor=0.0))
    return UpstreamError(f"{board} refused the request while {doing} ({detail})", kind="invalid_request",
                         retryable=False, status=status)


def graphql_error(board: str, errors: Any, doing: str) -> UpstreamError:
    """GitHub's and Linear's GraphQL errors (HTTP 200 or 400): rate limits retry, the rest is final."""
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    message = str(first.get("message", "GraphQL error"))[:300]
    ext = first.get("extensions") if isinstance(first.get("extensions"), dict) else {}
    code = str(first.get("type") or ext.get("code") or ext.get("type") or "").upper()
    if code in ("RATE_LIMITED", "RATELIMITED"):
        return UpstreamError(f"{board} rate limit reached while {doing} ({message}); it asks to wait 60 s",
                             kind="rate_limited", retryable=True, retry_after=60.0)
    if code in ("NOT_FOUND", "ENTITY_NOT_FOUND"):
        return UpstreamError(f"not found on {board} while {doing} ({message})", kind="not_found", retryable=False)
    if code in ("FORBIDDEN", "AUTHENTICATION_ERROR", "UNAUTHENTICATED", "INSUFFICIENT_SCOPES"):
        return UpstreamError(f"{board} refused while {doing} ({message})", kind="auth", retryable=False)
    return UpstreamError(f"{board} refused the request while {doing} ({message})", kind="invalid_request",
                         retryable=False)
