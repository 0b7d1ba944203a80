"""One GitHub client for the GitHub sources (PyGithub, retries off; token or App installation),
and which repository, branch and pull request a card is about.

Which commit: a card whose url is a pull request (…/owner/repo/pull/N), or whose id is a GitHub
board id ("owner:repo#N", "owner/repo#N") that names a pull request, is looked at through the
PR's head commit; otherwise the card's branch. A card with neither, or without a repository,
gets an empty result with a note: that is a fact about the card, not a failure of GitHub.
Failures leave as UpstreamError (errors.py); reasons never carry a credential.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import github
import httpx
import requests
from github.GithubException import GithubException
from github.PullRequest import PullRequest
from github.Repository import Repository

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.github_log import quiet_pygithub
from cardloop.integrations.sources.github.errors import classify_status, error_message, rate_limit_wait
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card

quiet_pygithub()  # PyGithub's import set its logger to INFO, with a stderr handler (github_log.py)

DEFAULT_API_URL = "https://api.github.com"
USER_AGENT = "cardloop-context"


class GitHubClient:
    """PyGithub for the REST and GraphQL calls, httpx for the two downloads PyGithub lacks
    (a job's log and an artifact's zip answer 302 to a signed URL on another host).

    `api_url`: https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise Server.
    `graphql_url`: defaults to the one PyGithub derives from api_url (…/graphql, …/api/graphql).
    Auth: `token`, or `app_id` + `app_private_key` + `installation_id` (an installation token is
    fetched and refreshed by PyGithub). `request_interval` is PyGithub's pause between requests
    (GitHub asks integrations to call serially and gently); tests pass None.
    """

    def __init__(
        self,
        api_url: str = DEFAULT_API_URL,
        *,
        token: str | Secret | None = None,
        app_id: int | str | None = None,
        app_private_key: str | Secret | None = None,
        installation_id: int | None = None,
        graphql_url: str | None = None,
        timeout: float = 30.0,
        request_interval: float | None = 0.25,
        user_agent: str = USER_AGENT,
        verify: bool | str = True,
        per_page: int = 100,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        token_value = reveal(token)
        key = reveal(app_private_key)
        app_parts = {"app id": app_id, "private key": key, "installation id": installation_id}
        if any(app_parts.values()) and not all(app_parts.values()) and not token_value:
            missing = ", ".join(k for k, v in app_parts.items() if not v)
            raise ValueError(f"GitHub App auth needs an app id, a private key and an installation id; "
                             f"missing: {missing}")
        auth: github.Auth.Auth
        # A complete App configuration wins over a token: installation tokens are short-lived.
        if app_id and key and installation_id:
            # Env vars often carry a PEM with literal "\n": restore the line breaks PEM needs.
            if "\\n" in key and "\n" not in key.strip():
                key = key.replace("\\n", "\n")
            app_auth = github.Auth.AppAuth(app_id, key)
            try:
                app_auth.create_jwt()  # a bad key is a configuration error: say so at start-up
            except Exception as exc:  # cryptography / pyjwt raise several types; never echo the key
                raise ValueError(f"GitHub App {app_id}: the private key cannot sign a JWT "
                                 f"({type(exc).__name__})") from None
            auth = app_auth.get_installation_auth(int(installation_id))
            self.auth_kind = f"GitHub App {app_id} installation {installation_id}"
        elif token_value:
            auth = github.Auth.Token(token_value)
            self.auth_kind = "token"
        else:
            raise ValueError("GitHub sources need a token or a GitHub App (app id, private key, installation id)")
        self._secrets = tuple(s for s in (token_value, key) if s)
        self.gh = github.Github(
            base_url=self.api_url,
            auth=auth,
            timeout=max(1, math.ceil(timeout)),  # PyGithub insists on an int
            retry=None,                          # Temporal retries the activity
            user_agent=user_agent,
            per_page=per_page,
            verify=verify,
            seconds_between_requests=request_interval,
            seconds_between_writes=request_interval,
        )
        self.graphql_url = graphql_url or self.gh.requester.graphql_url
        if urllib.parse.urlsplit(self.graphql_url).netloc != urllib.parse.urlsplit(self.api_url).netloc:
            # PyGithub sends credentials only to its own host: another one is a configuration slip.
            raise ValueError(f"graphql_url {self.graphql_url!r} is not on the API's host ({self.api_url})")
        self.timeout = timeout
        # follow_redirects: the 302 targets are signed storage URLs; httpx drops Authorization
        # when a redirect leaves the API's origin, so the token never reaches the storage host.
        self.http = httpx.Client(timeout=timeout, follow_redirects=True, verify=verify,
                                 headers={"User-Agent": user_agent, "Accept": "application/vnd.github+json"})

    def close(self) -> None:
        self.gh.close()
        self.http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- calls ------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        # Defence in depth: reasons are built from GitHub's messages, which never echo a
        # credential, but a reason must not carry one even if some proxy did.
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def calling(self, doing: str) -> Iterator[None]:
        """Turn whatever a GitHub call raises into an UpstreamError saying what was being done."""
        try:
            yield
        except UpstreamError:
            raise
        except GithubException as exc:
            raise self._failed(exc.status, exc.headers, error_message(exc.data), doing) from None
        except (requests.Timeout, httpx.TimeoutException):
            raise UpstreamError(f"GitHub ({self._host()}) timed out while {doing} (timeout {self.timeout:g} s)",
                                kind="timeout", retryable=True) from None
        except (requests.ConnectionError, httpx.TransportError) as exc:
            raise UpstreamError(f"cannot reach GitHub ({self._host()}) while {doing}: {type(exc).__name__}",
                                kind="connection", retryable=True) from None
        except requests.RequestException as exc:
            raise UpstreamError(f"GitHub request failed while {doing}: {type(exc).__name__}",
                                kind="unavailable", retryable=True) from None

    def _failed(self, status: int, headers: Any, message: str, doing: str) -> UpstreamError:
        err = classify_status(status, dict(headers or {}), message, doing)
        return UpstreamError(self.scrub(err.message), kind=err.kind, retryable=err.retryable, status=err.status,
                             retry_after=err.retry_after)

    def _host(self) -> str:
        return urllib.parse.urlsplit(self.api_url).netloc

    def _auth_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        auth = self.gh.requester.auth
        if auth is not None:
            auth.authentication(headers)  # an App installation token is fetched/refreshed here
        return headers

    def download(self, url: str, doing: str, *, max_bytes: int, keep: str = "tail") -> tuple[bytes, int]:
        """GET `url` with the client's auth, following the 302 to storage.

        Returns (body, total bytes seen). Over `max_bytes`, keep="tail" keeps the last bytes
        (a log's end says how it failed); keep="none" stops and returns b"" (a cut zip is useless).
        """
        with self.calling(doing), self.http.stream("GET", url, headers=self._auth_headers()) as resp:
            if resp.status_code >= 400:
                resp.read()
                try:
                    message = error_message(resp.json())
                except ValueError:
                    message = ""
                raise self._failed(resp.status_code, resp.headers, message, doing)
            buf = bytearray()
            total = 0
            for chunk in resp.iter_bytes():
                total += len(chunk)
                if total > max_bytes and keep == "none":
                    return b"", total
                buf += chunk
                if len(buf) > max_bytes:
                    del buf[: len(buf) - max_bytes]
            return bytes(buf), total

    def graphql(self, query: str, variables: dict[str, Any], doing: str) -> dict[str, Any]:
        """POST a GraphQL query with the client's auth. GraphQL answers its errors with 200 and an
        `errors` list: RATE_LIMITED is retryable after the reset, the others (NOT_FOUND,
        FORBIDDEN, a bad query) are not."""
        with self.calling(doing):
            headers, data = self.gh.requester.requestJsonAndCheck(
                "POST", self.graphql_url, input={"query": query, "variables": variables})
        if not isinstance(data, dict):
            raise UpstreamError(f"GitHub GraphQL answered no JSON object while {doing}", kind="bad_response",
                                retryable=True)
        errors = data.get("errors")
        if errors:
            first = errors[0] if isinstance(errors, list) and isinstance(errors[0], dict) else {}
            kind = str(first.get("type", "")) or "error"
            reason = self.scrub(f"GitHub GraphQL refused while {doing} ({kind}: {str(first.get('message', ''))[:300]})")
            if kind == "RATE_LIMITED":
                wait = rate_limit_wait(403, headers, "rate limit")
                raise UpstreamError(reason, kind="rate_limited", retryable=True, retry_after=wait)
            raise UpstreamError(reason, kind="not_found" if kind == "NOT_FOUND" else "invalid_request",
                                retryable=False)
        return data.get("data") or {}

    # -- which repository, branch and pull request ------------------------------------------

    def resolve(self, card: Card, *, find_pr_by_branch: bool = False) -> Target | str:
        """The card's repository, branch and pull request; a string says why there is nothing to look at."""
        ref = parse_pr_ref(card)
        repo_name = ref.repo if ref else card.repo
        if not repo_name:
            return "the card names no repository (card.repo, or a pull request url/id)"
        if ref is None and not card.branch:
            return f"the card names neither a branch nor a pull request of {repo_name}"
        with self.calling(f"reading repository {repo_name}"):
            repo = self.gh.get_repo(repo_name)
        notes: list[str] = []
        pr: PullRequest | None = None
        if ref is not None:
            try:
                with self.calling(f"reading pull request {repo_name}#{ref.number}"):
                    pr = repo.get_pull(ref.number)
                    _ = pr.head.sha
            except UpstreamError as err:
                # A GitHub board id names an issue as often as a PR: /pulls/N is 404 for an issue.
                if ref.definite or err.retryable or err.status != 404:
                    raise
                pr = None
                notes.append(f"{repo_name}#{ref.number} is an issue, not a pull request")
        if pr is None and card.branch and find_pr_by_branch:
            owner = repo_name.split("/", 1)[0]
            with self.calling(f"looking for an open pull request from branch {card.branch} of {repo_name}"):
                for candidate in repo.get_pulls(state="open", head=f"{owner}:{card.branch}"):
                    pr = candidate
                    break
        if pr is None and not card.branch:
            return "; ".join([*notes, f"the card names no branch of {repo_name} to look at"])
        return Target(repo=repo, name=repo_name, branch=card.branch, pr=pr, notes=tuple(notes))


@dataclass(frozen=True)
class PullRef:
    repo: str
    number: int
    definite: bool  # from a /pull/N url; an "owner:repo#N" id may name an issue


_PR_URL = re.compile(r"/(?:repos/)?([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/pulls?/(\d+)(?:[/?#]|\Z)")
_PR_ID = re.compile(r"^([A-Za-z0-9_.-]+)[:/]([A-Za-z0-9_.-]+)#(\d+)\Z")


def parse_pr_ref(card: Card) -> PullRef | None:
    """The pull request a card names by url (definite) or by a GitHub board id (maybe an issue)."""
    if card.url:
        m = _PR_URL.search(urllib.parse.urlsplit(card.url).path + "/")
        if m:
            return PullRef(f"{m.group(1)}/{m.group(2)}", int(m.group(3)), definite=True)
    m = _PR_ID.match(card.id)
    if m:
        return PullRef(f"{m.group(1)}/{m.group(2)}", int(m.group(3)), definite=False)
    return None


@dataclass(frozen=True)
class Target:
    repo: Repository
    name: str
    branch: str | None
    pr: PullRequest | None
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.pr is not None:
            return f"{self.name}#{self.pr.number} (head {self.pr.head.sha[:12]})"
        return f"{self.name} branch {self.branch}"

