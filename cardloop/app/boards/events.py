"""The one canonical event every board adapter produces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cardloop.contracts.config import StageTarget


class BoardEvent(BaseModel):
    """Something that happened to a card on a board.

    kind "transition": the card moved to `to_column`; `stage` is what config.toml maps that column
    to (None: an unmapped column, acknowledged and ignored). kind "comment": `comment` joins the
    card's chat history. kind "build_failed": CI failed on the card's branch (`stage` is the
    board's failure_stage). kind "edit": the card was renamed or its description edited, nothing
    else: its `title`, `body` or `url` replace the stored card's. kind "archive": the card was
    archived or deleted on the board (`gone` says which): its running stage is cancelled, its work
    kept, and nothing starts. kind "repository" (GitHub): the repository `was[0]` ("owner/name")
    is `repo` now; `card_id` is the repository's new name, no card's. A `comment` on a move or build
    failure is what the board says about it (which run failed, where): it joins the history, from
    the board, before the move.

    `tenant` is the tenant the payload NAMES (through boards.<board>.tenants), None when it names
    none: a claim that the route checks against the tenant whose secret signed the delivery.
    `delivery_id` is the board's own id for the delivery, a label for logs and answers: it comes
    from unsigned headers, so dedup keys on the signed content instead (boards/replay.py)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["transition", "comment", "build_failed", "edit", "archive", "repository"]
    board: Literal["github", "linear", "jira", "trello", "generic"]
    tenant: str | None = None
    card_id: str = Field(min_length=1, max_length=200)
    delivery_id: str = Field(min_length=1, max_length=300)
    from_column: str | None = None
    to_column: str | None = None
    stage: StageTarget | None = None
    title: str | None = None
    body: str | None = None
    url: str | None = None
    repo: str | None = None
    branch: str | None = None
    actor: str | None = None
    comment: str | None = None
    gone: Literal["archived", "deleted"] | None = None   # kind "archive": what the board did to the card
    # When the change happened, for a board whose event time is not what the replay window checks
    # (Linear: data.updatedAt; its window holds the send time): orders late moves (boards/order.py).
    at: float | None = None
    # The card's stable id on its board, which a move to another team or project keeps (Linear's
    # issue UUID, Jira's numeric issue id, Trello's long card id, GitHub's issue or pull request
    # node id, which a repository rename keeps), and the ids the delivery says it had before
    # (Linear's previousIdentifiers, Jira's `Key` changelog item, the issue a GitHub transfer
    # moved): they lead a `card_id` cardloop has not seen to the card it already keeps
    # (boards/identity.py).
    board_uid: str | None = Field(default=None, max_length=300)
    was: tuple[str, ...] = ()
    # The board's item that holds the card (a GitHub Projects v2 item's node id), which keeps its
    # id when its issue is transferred (a new issue, number and node id): a move of the item
    # reaches the card the item held before the transfer's own delivery says so (boards/identity.py).
    board_item: str | None = Field(default=None, max_length=300)
    # The issue itself moved to `repo` (a GitHub issue transferred to another repository): the
    # card's repository follows it, where otherwise a card's repository is only ever filled in.
    repo_moved: bool = False


class Ignored(BaseModel):
    """A well-formed delivery that asks nothing of cardloop; the reason goes into the 2xx reply."""

    model_config = ConfigDict(frozen=True)

    reason: str


class WebhookError(Exception):
    """A delivery cardloop refuses. `status` is the HTTP answer: 400 malformed, 401 signature,
    413 too large, 503 board not configured (no secret). Never a 500 for sender input."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SignatureMismatch(WebhookError):
    """The signature is well formed but was not made with this secret (401). The route tries
    every tenant's secret for the board; only this error means "try the next one"."""

    def __init__(self, message: str) -> None:
        super().__init__(401, message)
