"""What the webhook tests share: secrets, each board's signature scheme computed the way the
board computes it, a settable wall clock and the real app over an ASGI transport."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import httpx

from cardloop.app.api.app import create_app
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.contracts.config import Config
from tests.stack import Stack

SECRET = "webhook-secret-for-tests"
TRELLO_CALLBACK = "https://cardloop.example/webhooks/trello"
ENV = {"CARDLOOP_GENERIC_WEBHOOK_SECRET": SECRET, "CARDLOOP_GITHUB_WEBHOOK_SECRET": SECRET,
       "CARDLOOP_JIRA_WEBHOOK_SECRET": SECRET, "CARDLOOP_LINEAR_WEBHOOK_SECRET": SECRET,
       "CARDLOOP_TRELLO_SECRET": SECRET, "CARDLOOP_API__MAX_BODY_BYTES": "65536",
       "CARDLOOP_BOARDS__TRELLO__CALLBACK_URL": f'"{TRELLO_CALLBACK}"'}


def at(iso: str) -> float:
    """Seconds since the epoch of an ISO 8601 time (when a fixture's event happened)."""
    return datetime.fromisoformat(iso).timestamp()


class Clock:
    """The wall clock the app checks signed event times against, set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def hub_signature(body: bytes, secret: str = SECRET) -> str:
    """GitHub's, the generic board's (X-Hub-Signature-256) and Jira's (X-Hub-Signature) value."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def linear_signature(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def trello_signature(body: bytes, secret: str = SECRET, callback: str = TRELLO_CALLBACK) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body + callback.encode(), hashlib.sha1).digest()).decode()


@asynccontextmanager
async def webhook_client(stack: Stack, config: Config | None = None, clock: Clock | None = None,
                         cards: Any = None) -> AsyncIterator[httpx.AsyncClient]:
    """The real app on the stack's store and Temporal, reached through an ASGI transport."""
    config = config or stack.config
    async with httpx.AsyncClient() as http:
        extra = {"clock": clock} if clock is not None else {}
        svc = Services(config=config, store=stack.store, runtime=stack.runtime, cards=cards or stack.cards,
                       http=http, adapters=build_adapters(config, http), **extra)
        transport = httpx.ASGITransport(app=create_app(svc))
        async with httpx.AsyncClient(transport=transport, base_url="http://cardloop") as client:
            yield client


def generic(card_id: str, to_column: str, delivery_id: str, **extra: object) -> bytes:
    """A generic board's move as its sender writes it."""
    return json.dumps({"card_id": card_id, "to_column": to_column, "delivery_id": delivery_id,
                       "title": f"Card {card_id}", "repo": "acme/payments-api", **extra}).encode()
