"""argparse types for the values several commands take: a bad one is a usage error (exit 2)
naming the option and the value, before the command opens a store or calls Temporal."""

from __future__ import annotations

import argparse

from cardloop.prompts.tenant_id import TENANT_RULE, is_tenant_id


def shown(value: str, most: int = 80) -> str:
    """`value` as an error message quotes it: repr, and cut when long (a 5,000-character name
    pasted by mistake made the message a screenful)."""
    if len(value) <= most:
        return repr(value)
    return f"{value[:most - 20]!r}… ({len(value):,} characters)"


def said(exc: ValueError) -> str:
    """A bad key's reason in one line, naming the part refused: pydantic's ValidationError prints
    a report of several, and its messages start with the value alone."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    parts = []
    for error in errors():
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        field = str(error["loc"][0]).replace("_", " ") if error.get("loc") else ""
        parts.append(message if not field or message.startswith(field) else f"{field} {message}")
    return "; ".join(parts)


def tenant_arg(value: str) -> str:
    """argparse type of a --tenant: refused as a usage error before anything runs."""
    if not is_tenant_id(value):
        raise argparse.ArgumentTypeError(f"{shown(value)}: {TENANT_RULE}")
    return value


def board_arg(value: str) -> str:
    """argparse type of a --board: a board name a card key can hold (github, linear, jira, ...)."""
    from cardloop.contracts.payloads import CardRef

    try:
        CardRef(board=value, card_id="x")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(said(exc).removeprefix("board ")) from None
    return value


def port_arg(text: str) -> int:
    """A TCP port to listen on: 1 to 65535 (the socket layer raises OverflowError beyond)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (1 to 65535)")
    return value


def actor_arg(text: str) -> str:
    """--actor / --author: a name the card's history records (the payload's limit, checked before
    the command connects: past it, pydantic's report came after the connect, as a traceback)."""
    from cardloop.contracts.payloads import MAX_ACTOR

    if len(text) > MAX_ACTOR:
        raise argparse.ArgumentTypeError(f"{len(text):,} characters; at most {MAX_ACTOR}")
    return text


def delivery_id_arg(text: str) -> str:
    """--delivery-id: an idempotency key. An empty one was replaced by a random key without a word,
    so a repeated delivery ran twice."""
    from cardloop.contracts.payloads import MAX_DELIVERY_ID

    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give the key that makes the move idempotent, or leave it out")
    if len(text) > MAX_DELIVERY_ID:
        raise argparse.ArgumentTypeError(f"{len(text):,} characters; at most {MAX_DELIVERY_ID}")
    return text


def file_arg(text: str) -> str:
    """A file named on the command line: an empty name (`--config "$UNSET"`) is refused; it was
    taken as no name, and the default file was used without a word."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty file name")
    return text
