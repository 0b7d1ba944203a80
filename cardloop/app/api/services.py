"""What the HTTP routes share: built once by create_app, reached as request.app.state.services."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import Request

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.contracts.config import Config
from cardloop.store import Store


@dataclass
class Services:
    config: Config
    store: Store
    runtime: ActivityDeps                   # prompt assembler and LLM providers (the gateway)
    cards: CardService | None          # Temporal; None when the API runs without it (some tests)
    http: httpx.AsyncClient            # outbound calls: GitHub GraphQL
    clock: Callable[[], float] = field(default=time.time)  # wall clock, injectable for signature windows
    adapters: Mapping[str, Any] = field(default_factory=dict)  # board name -> BoardAdapter (cardloop.boards)


def services(request: Request) -> Services:
    return request.app.state.services
