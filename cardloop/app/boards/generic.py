"""The generic board: any tool that can POST JSON signed like GitHub (X-Hub-Signature-256)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cardloop.app.boards.events import BoardEvent, Ignored
from cardloop.app.boards.payload import bad, event, field_problems, finite_number, header, kind, load_object
from cardloop.app.boards.replay import json_object
from cardloop.app.boards.signatures import verify_github
from cardloop.contracts.config import BoardConfig, StageTarget
from cardloop.prompts.card import MAX_BRANCH, MAX_REPO, MAX_TITLE, MAX_URL, REPO_PATTERN

_Text = Field(default=None, max_length=100_000)
# Room left in BoardEvent.delivery_id (300) for the ":comment" suffix of a move's comment.
MAX_DELIVERY_ID = 280


class GenericEvent(BaseModel):
    """One card event posted to the generic webhook (POST, JSON, `X-Hub-Signature-256:
    sha256=<hex HMAC-SHA256 of the body>` keyed with CARDLOOP_GENERIC_WEBHOOK_SECRET).

    - A move: `to_column` (mapped through [boards.generic.columns]) or `stage` (a stage name or
      "done", used as given; `to_column` is then only recorded). An unmapped `to_column` is
      acknowledged and ignored.
    - An edit: `title`, `body` or `url` alone (no move, no comment): the known card's fields
      change, nothing runs.
    - An archive: `gone` ("archived" or "deleted"), with no move, comment or edit: the card was
      archived or deleted on the sending board, and its running stage is cancelled, its work kept.
    - A comment: `comment` without `to_column` or `stage`. With a move, the comment is delivered
      first, so the stage it starts already sees it.
    - `delivery_id` (or the X-Delivery-Id header) is required, a label in answers and logs. Dedup
      keys on the signed body: the same body is applied once, whatever the header says, so two
      events that should both apply differ in the body (`delivery_id` or `timestamp`).
    - `timestamp` (seconds since the epoch), when given, must be within
      boards.generic.replay_window_seconds of now.
    - `tenant`, when given, is a key of [boards.generic.tenants] or a tenant's name, and must be
      the tenant whose secret signed the body (else 403).
    Unknown fields are refused, so a misspelt `stgae` fails loudly instead of being dropped. The
    card's fields (title, url, repo, branch) have the card's own limits (prompts/card.py): a
    value accepted here is never refused when the card is created."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    card_id: str = Field(min_length=1, max_length=200, description="The card's id on the sending board.")
    tenant: str | None = Field(default=None, max_length=200,
                               description="Tenant key, mapped by boards.generic.tenants.")
    to_column: str | None = Field(default=None, min_length=1, max_length=200,
                                  description="The column the card moved to.")
    stage: StageTarget | None = Field(default=None, description="The stage to run, instead of a column.")
    from_column: str | None = Field(default=None, max_length=200, description="The column the card left.")
    title: str | None = Field(default=None, max_length=MAX_TITLE)
    body: str | None = _Text
    url: str | None = Field(default=None, max_length=MAX_URL)
    repo: str | None = Field(default=None, max_length=MAX_REPO, pattern=REPO_PATTERN,
                             description='Repository, "owner/name".')
    branch: str | None = Field(default=None, max_length=MAX_BRANCH)
    actor: str | None = Field(default=None, max_length=200, description="Who made the change.")
    delivery_id: str | None = Field(default=None, min_length=1, max_length=MAX_DELIVERY_ID,
                                    description="Unique per event; else the X-Delivery-Id header.")
    # No length limits of its own: the route answers a blank comment "ignored" (its move still
    # runs) and keeps a long one (a pasted log) cut to its head and tail, as for every board;
    # api.max_body_bytes bounds it.
    comment: str | None = Field(default=None, description="A comment that joins the card's chat history.")
    gone: Literal["archived", "deleted"] | None = Field(
        default=None, description="The card was archived or deleted on the sending board: its running stage stops.")
    timestamp: float | None = Field(default=None, strict=True, allow_inf_nan=False,
                                    description="When the event was sent, seconds since the epoch: a replay "
                                                "further than boards.generic.replay_window_seconds is refused.")

    @model_validator(mode="after")
    def _says_something(self) -> GenericEvent:
        changes = (self.to_column, self.stage, self.comment, self.title, self.body, self.url)
        if self.gone is not None:
            # One event per body: an archive that also moved the card would start what it stops.
            if any(value is not None for value in changes):
                raise ValueError("gone stands alone: no to_column, stage, comment, title, body or url with it")
            return self
        if (self.to_column is None and self.stage is None and self.comment is None
                and self.title is None and self.body is None and self.url is None):
            raise ValueError("give to_column, stage or comment (or title, body or url to edit the card, or gone "
                             "when it was archived or deleted)")
        return self


def generic_event_schema() -> dict[str, Any]:
    """The JSON Schema of what the generic webhook accepts (GenericEvent)."""
    return GenericEvent.model_json_schema()


class GenericAdapter:
    name = "generic"
    secret_env = "CARDLOOP_GENERIC_WEBHOOK_SECRET"

    def __init__(self, board: BoardConfig) -> None:
        self.board = board

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None:
        verify_github(headers, body, secret)

    def signed_content(self, body: bytes) -> bytes:
        return body

    def event_time(self, headers: Mapping[str, str], body: bytes) -> float | None:
        data = json_object(body)
        stamp = data.get("timestamp") if data is not None else None
        # Anything but a number is refused by parse (GenericEvent.timestamp is strict).
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            return None
        seconds = finite_number(stamp)
        if seconds is None:
            raise bad(f"timestamp must be a finite number of seconds since the epoch, got {kind(stamp)}")
        return seconds

    async def parse(self, headers: Mapping[str, str], body: bytes) -> list[BoardEvent] | Ignored:
        data = load_object(body)
        try:
            posted = GenericEvent.model_validate(data)
        except ValidationError as exc:
            raise bad(f"not a generic card event: {field_problems(exc)}") from None
        delivery = posted.delivery_id or header(headers, "X-Delivery-Id")
        if not delivery:
            raise bad("missing delivery_id (in the body or the X-Delivery-Id header)")
        if len(delivery) > MAX_DELIVERY_ID:
            raise bad(f"delivery id longer than {MAX_DELIVERY_ID} characters")
        common = {
            "board": self.name, "card_id": posted.card_id,
            # A key of [boards.generic.tenants], else the tenant's own name: a claim the route
            # checks against the tenant whose secret signed the body.
            "tenant": self.board.named_tenant(posted.tenant) or posted.tenant or None,
            "title": posted.title, "body": posted.body, "url": posted.url, "repo": posted.repo,
            "branch": posted.branch, "actor": posted.actor,
        }
        events: list[BoardEvent] = []
        moves = posted.to_column is not None or posted.stage is not None
        if posted.gone is not None:
            return [event(kind="archive", **common, delivery_id=delivery, gone=posted.gone)]
        if not moves and posted.comment is None:
            return [event(kind="edit", **common, delivery_id=delivery)]
        if posted.comment is not None:
            events.append(event(kind="comment", **common, comment=posted.comment,
                                delivery_id=f"{delivery}:comment" if moves else delivery))
        if moves:
            stage = posted.stage or self.board.stage_for(posted.to_column)
            events.append(event(kind="transition", **common, delivery_id=delivery, from_column=posted.from_column,
                                to_column=posted.to_column or posted.stage, stage=stage))
        return events
