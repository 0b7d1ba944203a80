"""What activities share on one worker: the store, the config, the prompt assembler and
the providers. Built once by the worker (cardloop/app/worker.py) and injected, so activities
stay thin and tests can build one around a loopback model server."""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cardloop.activities.heartbeat import HeartbeatingStore
from cardloop.activities.received import ReceivedReplies
from cardloop.contracts.config import Config
from cardloop.contracts.limits import Reservation
from cardloop.integrations.providers import Price, Provider, build_provider, cost_usd
from cardloop.integrations.providers.base import Usage
from cardloop.integrations.sources.base import Source
from cardloop.integrations.upstream import UpstreamError
from cardloop.integrations.workspace import (
    Sandbox,
    WorkspaceManager,
    hidden_paths,
    manager_from_config,
    sandbox_limits,
)
from cardloop.prompts.assemble import PromptAssembler
from cardloop.prompts.conversation import Conversation
from cardloop.prompts.scrub import Scrubber
from cardloop.store import Store

_log = logging.getLogger(__name__)


@dataclass
class ActivityDeps:
    config: Config
    store: Store
    assembler: PromptAssembler
    # Profile name -> base URL, overriding config (the demo's scripted model, tests).
    base_urls: dict[str, str] = field(default_factory=dict)
    timeout: float = 600.0
    _providers: dict[str, Provider] = field(default_factory=dict)
    _sources: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # This worker's own task queue: the workspace activities for the worktrees on its disk.
    workspace_queue: str = ""
    _workspaces: dict[str, WorkspaceManager] = field(default_factory=dict)
    _sandbox: Sandbox | None = None
    # Model answers received but not yet stored, for a retried attempt to record instead of calling again.
    received: ReceivedReplies = field(default_factory=ReceivedReplies)

    def __post_init__(self) -> None:
        # Every store call of an activity heartbeats while it waits (activities/heartbeat.py).
        if not isinstance(self.store, HeartbeatingStore):
            self.store = HeartbeatingStore(self.store)  # type: ignore[assignment]
        if not self.workspace_queue:
            # Unique per process: a restarted worker must not inherit the queue of worktrees it lost.
            self.workspace_queue = (f"{self.config.temporal.task_queue}/workspace/"
                                    f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")

    def workspaces(self, tenant: str, repo: str) -> WorkspaceManager:
        """The worktrees on this worker's disk ([workspace] root) for `tenant`, which must be
        allowed `repo` ([tenants] in config.toml; AccessDenied otherwise). One per tenant."""
        manager = manager_from_config(self.config, tenant, repo)  # checks the allow-list every time
        with self._lock:
            return self._workspaces.setdefault(tenant, manager)

    def sandbox(self) -> Sandbox:
        """run_command's sandbox; which protections this platform allows is detected once."""
        with self._lock:
            if self._sandbox is None:
                self._sandbox = Sandbox(sandbox_limits(self.config.workspace.sandbox, hidden_paths(self.config)))
            return self._sandbox

    @classmethod
    def build(cls, config: Config, store: Store, *, base_urls: dict[str, str] | None = None) -> ActivityDeps:
        assembler = PromptAssembler(config.template_store(), config.token_counter(), Scrubber())
        return cls(config=config, store=store, assembler=assembler, base_urls=dict(base_urls or {}))

    def provider(self, profile: str) -> Provider:
        """One client per profile, built on first use; its key comes from the environment."""
        with self._lock:
            cached = self._providers.get(profile)
            if cached is not None:
                return cached
            prof = self.config.profiles[profile]
            key = self.config.api_key(profile)
            if key is None and prof.provider != "openai":
                raise UpstreamError(
                    f"profile {profile!r}: no API key; set the environment variable {prof.api_key_env}",
                    status=None, retryable=False, kind="auth")
            base_url = self.base_urls.get(profile) or prof.base_url or None
            provider = build_provider(prof.provider, api_key=key.reveal() if key else None,
                                      base_url=base_url, timeout=self.timeout)
            self._providers[profile] = provider
            return provider

    def warm_providers(self) -> None:
        """Build every profile's client ahead of its first call. Why: building one imports its
        SDK (the anthropic SDK takes about a second), under this object's lock, inside the
        first model call a worker makes, where it delayed a research plan by that second. A
        profile that cannot be built now (no key) is left for its first call to report."""
        for name in self.config.profiles:
            try:
                self.provider(name)
            except Exception as err:  # a warm-up only; the real call raises it where it matters
                _log.debug("provider for profile %s not built ahead: %s", name, err)

    def source(self, name: str) -> Source:
        """One instance per source name, built on first use from config.toml."""
        with self._lock:
            cached = self._sources.get(name)
            if cached is None:
                from cardloop.integrations.sources.registry import build_source

                cached = self._sources[name] = build_source(name, self.config)
            return cached

    def close(self) -> None:
        """Close the provider clients and context sources (their connection pools)."""
        with self._lock:
            providers, self._providers = list(self._providers.values()), {}
            sources, self._sources = list(self._sources.values()), {}
        for provider in [*providers, *sources]:
            close = getattr(provider, "close", None)
            if close is not None:
                close()

    def cost(self, model: str, usage: Usage) -> float:
        p = self.config.price(model)
        return cost_usd(usage, Price(p.input, p.output, p.cache_read, p.cache_write))

    def prompt_tokens(self, model: str, conversation: Conversation) -> int:
        """The conversation's tokens as the model would count them, near enough for a call's
        reservation: cl100k_base times the model's calibration (its margin), as budgets count."""
        known = self.config.models.get(model)
        raw = self.assembler.counter.raw(conversation.counted_text())
        return math.ceil(raw * (known.calibration if known else 1.0))

    def reservation(self, model: str, prompt_tokens: int, max_tokens: int) -> Reservation:
        """What a call holds against its tenant's token and cost caps while it runs: its prompt
        and the most it may answer, priced as plain input and output (settling it replaces this
        with what the provider reports)."""
        tokens = max(prompt_tokens, 0) + max(max_tokens, 0)
        cost = self.cost(model, Usage(input_tokens=max(prompt_tokens, 0), output_tokens=max(max_tokens, 0)))
        return Reservation(tokens=tokens, cost_usd=Decimal(str(cost)))
