"""Replays of signed deliveries: dedup keyed on what the board signs, and a time window.

A board's delivery id travels in a header that no signature covers (`X-GitHub-Delivery`,
`Linear-Delivery`, `X-Atlassian-Webhook-Identifier`, `X-Delivery-Id`), so anybody holding one
signed body could send it again under fresh ids. The dedup key is therefore a digest of the
signed content (adapter.signed_content: the body, plus Trello's callback URL, less Linear's
send time), the event's kind and its card; the header id is kept only as a label.

Dedup alone would have to remember every key forever; where the signed body carries the
event's time, a delivery further than `boards.<board>.replay_window_seconds` from now is
refused (401), which bounds how long a captured body stays usable:

    board     time in the signed body                              bound
    Linear    webhookTimestamp (the send time)                      60 s (signatures.py)
    GitHub    projects_v2_item / comment / workflow_run / check_suite .updated_at   the window
    Jira      timestamp (ms)                                        the window
    Trello    action.date                                           the window
    generic   timestamp (seconds), when the sender includes it      the window; none without it
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from cardloop.app.boards.events import BoardEvent, WebhookError
from cardloop.app.boards.payload import bad, finite_number, kind, lookup


def delivery_key(signed_content: bytes, event: BoardEvent) -> str:
    """The dedup key of one event of a delivery: the same signed content yields the same key
    whatever header id it arrives with; one delivery's events (a comment and a move, a build
    failure on several PRs) keep keys of their own."""
    digest = hashlib.sha256()
    for part in (hashlib.sha256(signed_content).digest(), event.kind.encode(), event.card_id.encode()):
        digest.update(len(part).to_bytes(4, "big") + part)  # length-prefixed: no two splits collide
    return "sha256:" + digest.hexdigest()


def json_object(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None (parse answers 400 for it later)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def canonical_without(body: bytes, *fields: str) -> bytes:
    """The JSON object body re-serialised canonically without the top-level `fields` (what a
    board changes between retries of one event); the body itself when it is not an object."""
    data = json_object(body)
    if data is None:
        return body
    kept = {k: v for k, v in data.items() if k not in fields}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8",
                                                                                               "surrogatepass")


def iso_time(data: dict[str, Any] | None, path: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 time at `path` ("2025-03-04T10:15:30.456Z"); None
    when absent; 400 when it is not a time with a zone."""
    value = lookup(data, path) if data is not None else None
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(f"{path} must be an ISO 8601 time, got {kind(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise bad(f"{path} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise bad(f"{path} has no time zone")
    return parsed.timestamp()


def number_time(data: dict[str, Any] | None, path: str, per_second: float = 1.0) -> float | None:
    """Seconds since the epoch of a number at `path` counted in 1/per_second units; None when
    absent; 400 when it is not a finite number."""
    value = lookup(data, path) if data is not None else None
    if value is None:
        return None
    number = finite_number(value)
    if number is None:
        raise bad(f"{path} must be a finite number, got {kind(value)}")
    return number / per_second


_TEN_YEARS = 10 * 365.25 * 86400


def check_window(sent: float | None, now: float, window: float, board: str) -> None:
    """401 when the event time in the signed body is further than `window` seconds from now."""
    if sent is None or window <= 0:
        return
    skew = abs(now - sent)
    if skew > window:
        # A sender's 1e308 would be a 309-digit number in a one-line answer: past ten years, say so.
        away = f"{skew:.0f} s" if skew <= _TEN_YEARS else "more than ten years"
        raise WebhookError(401, f"the signed event time is {away} away from now (boards.{board}."
                                f"replay_window_seconds is {window:.0f}): a replayed or badly delayed delivery")
