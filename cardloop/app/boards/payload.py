"""Reading sender-controlled JSON: every lookup either returns a value of the expected type or
raises WebhookError(400) naming the path, so a malformed delivery never becomes a 500.

Absent and null are the same thing here ("missing"): boards send `null` for unset fields.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from cardloop.app.boards.events import BoardEvent, WebhookError
from cardloop.prompts.card import REPO_RULE
from cardloop.prompts.surrogates import find_surrogate


def bad(message: str) -> WebhookError:
    return WebhookError(400, message)


def kind(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"  # NaN or Infinity: Python's json accepts both
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_FORM = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*=[^=]")


def finite_number(value: Any) -> float | None:
    """A JSON number as a finite float; None for anything else, NaN and Infinity (which Python's
    json accepts) and an integer too large for a float (`math.isfinite` raises on one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def load_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or 400."""
    try:
        data = json.loads(body)
    except RecursionError:
        # json's C decoder recurses per nesting level; a hostile body can nest deeper than the stack.
        raise bad("body is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both derive from it
        if _FORM.match(body):  # GitHub's other content type: `payload=<url-encoded JSON>`
            raise bad("body is form-encoded, not JSON: set the webhook's content type to application/json") from None
        raise bad(f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad(f"body must be a JSON object, got {kind(data)}")
    # An unpaired "\ud800" escape parses into a lone surrogate, which nothing downstream can encode.
    if (broken := find_surrogate(data, "body")) is not None:
        raise bad(broken)
    return data


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted path (a numeric step indexes an array); None when any step is absent or null."""
    cur = data
    walked: list[str] = []
    for part in path.split("."):
        if cur is None:
            return None
        if isinstance(cur, list) and part.isdigit():
            cur = cur[int(part)] if int(part) < len(cur) else None
        elif isinstance(cur, dict):
            cur = cur.get(part)
        else:
            raise bad(f"{'.'.join(walked) or 'body'} must be an object, got {kind(cur)}")
        walked.append(part)
    return cur


def opt_str(data: Any, path: str) -> str | None:
    value = lookup(data, path)
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(f"{path} must be a string, got {kind(value)}")
    return value


def req_str(data: Any, path: str) -> str:
    value = opt_str(data, path)
    if not value:
        raise bad(f"missing {path}")
    return value


def opt_int(data: Any, path: str) -> int | None:
    value = lookup(data, path)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"{path} must be an integer, got {kind(value)}")
    return value


def req_int(data: Any, path: str) -> int:
    value = opt_int(data, path)
    if value is None:
        raise bad(f"missing {path}")
    return value


def opt_obj(data: Any, path: str) -> dict[str, Any] | None:
    value = lookup(data, path)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad(f"{path} must be an object, got {kind(value)}")
    return value


def req_obj(data: Any, path: str) -> dict[str, Any]:
    value = opt_obj(data, path)
    if value is None:
        raise bad(f"missing {path}")
    return value


def opt_list(data: Any, path: str) -> list[Any]:
    value = lookup(data, path)
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad(f"{path} must be an array, got {kind(value)}")
    return value


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header by its lower-case name (the Mapping is case-insensitive, as starlette's and httpx's are)."""
    value = headers.get(name.lower())
    return (value.strip() or None) if isinstance(value, str) else None


def field_problems(exc: ValidationError, limit: int = 5) -> str:
    """Each failed field and what is wrong with it, for an answer to the sender: never pydantic's
    own text, which echoes the (possibly huge, possibly secret) input and links its website."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {_says(err)}" for err in exc.errors()[:limit])


def _says(err: Any) -> str:
    if err["type"] == "string_pattern_mismatch" and err["loc"][-1:] == ("repo",):
        return REPO_RULE   # the rule in words: a regex tells a sender little
    return str(err["msg"])


def event(**fields: Any) -> BoardEvent:
    """A BoardEvent, or 400 when a sender's value breaks one of its limits (e.g. an over-long card id)."""
    try:
        return BoardEvent(**fields)
    except ValidationError as exc:
        raise bad(f"payload yields an invalid event: {field_problems(exc, limit=20)}") from None


def short(value: Any, limit: int = 60) -> str:
    """A sender's value quoted for a reason or message, cut so a reply never echoes a whole payload."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# A board's stable id for a card: a UUID, a number, a hex id (never text a person typed).
_STABLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,299}")
_MAX_FORMER_IDS = 20


def stable_id(data: Any, *paths: str) -> str | None:
    """The first of `paths` holding an id the board keeps for a card across moves (a string or a
    whole number, as text); None when none does. Optional: a delivery whose value there is odd
    (an object, a long text) is answered as before, by the card's human id alone."""
    for path in paths:
        try:
            value = lookup(data, path)
        except WebhookError:   # a step on the way is not an object: nothing there
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            value = str(value)
        if isinstance(value, str) and _STABLE_ID.fullmatch(value):
            return value
    return None


def former_ids(values: Any) -> tuple[str, ...]:
    """The human ids a delivery says the card had before (Linear's previousIdentifiers), each one a
    card key can hold; others are left out, as is anything that is not a list of strings."""
    from cardloop.contracts.payloads import card_key_id

    if not isinstance(values, list):
        return ()
    kept: list[str] = []
    for value in values[-_MAX_FORMER_IDS:]:
        if not isinstance(value, str) or value in kept:
            continue
        try:
            card_key_id(value)
        except ValueError:
            continue
        kept.append(value)
    return tuple(kept)
