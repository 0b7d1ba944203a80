"""The prompt side of a call: the caller's request layered under the guardrails and the tenant's
prompt by the prompt core, its turns redacted, ready for the profile's provider."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from cardloop.app.api.gateway.models import STAGE, GatewayCall, GatewayError, Prepared, invalid, logger
from cardloop.app.api.services import Services
from cardloop.prompts.assemble import AssemblyError, AssemblyRequest
from cardloop.prompts.card import Card, TenantPrompt
from cardloop.prompts.conversation import Conversation, SystemBlock, Turn
from cardloop.prompts.formats import intercept
from cardloop.prompts.layers import request_verdict
from cardloop.prompts.tenant_id import is_tenant_id
from cardloop.prompts.validate import ValidationStatus

# Sent first when the caller's conversation opens with the assistant (see the package docstring).
OPENER = "(The conversation continues.)"

# The assembler's and scrubber's caches are plain dicts (see PromptActivities): one at a time.
_PROMPT_LOCK = threading.Lock()


def tenant_prompt_for(store: Any, tenant: str) -> TenantPrompt | None:
    """The tenant's current prompt, when the store can say.

    `current_tenant_prompt(tenant)` is looked up with getattr because the store gains it with
    tenant prompt management; until then (or on a store without it) there is no tenant layer.
    It may answer a TenantPrompt, a mapping of its fields, or a record holding one as `.prompt`.
    An answer that does not read as a TenantPrompt is logged and left out, as the prompt core
    leaves out a prompt that fails validation.
    """
    lookup = getattr(store, "current_tenant_prompt", None)
    if lookup is None:
        return None
    found = lookup(tenant)
    if found is None or isinstance(found, TenantPrompt):
        return found
    if isinstance(getattr(found, "prompt", None), TenantPrompt):
        return found.prompt
    if not isinstance(found, Mapping):
        fields = TenantPrompt.model_fields
        found = {name: getattr(found, name) for name in fields if hasattr(found, name)}
    try:
        return TenantPrompt.model_validate({k: v for k, v in found.items() if k in TenantPrompt.model_fields})
    except ValidationError as exc:
        logger.error("tenant %s: stored prompt unreadable, left out: %s", tenant, exc)
        return None


def check_request_system(text: str | None, protocol: str) -> None:
    """The caller's system text passes the tenant prompt's rules (no length limit): a REJECTED
    one is a 400 naming each issue, never silently dropped (the caller would not know why its
    application behaves differently) and never sent."""
    if not text or not text.strip():
        return
    verdict = request_verdict(text.strip())
    if verdict.status != ValidationStatus.REJECTED:
        return
    issues = "; ".join(f"{i.category} [{i.start}:{i.end}] {i.message}" for i in verdict.issues[:5])
    more = f" (and {len(verdict.issues) - 5} more)" if len(verdict.issues) > 5 else ""
    field = "system" if protocol == "anthropic" else "messages"
    raise GatewayError(400, f"{field}: the system prompt was rejected by validation: {issues}{more}",
                       code="system_prompt_rejected", param=field)


def layered_conversation(svc: Services, tenant: str, call: GatewayCall) -> tuple[Conversation, int, list[str]]:
    """The conversation to send: the prompt core's layered system block + the caller's turns.

    Returns it with the number of secrets redacted and intercept's warnings.
    """
    parsed = intercept(dict(call.body))
    if not parsed.conversation.turns:
        raise invalid("messages: at least one user or assistant message is required", "messages")
    check_request_system(parsed.conversation.system_text, call.protocol)
    config = svc.config
    settings = config.assembly_settings(None, config.gateway.profile)
    # The caller's system prompt is its application's: cut only past the whole prompt budget.
    settings = dataclasses.replace(settings, budget=dataclasses.replace(settings.budget,
                                                                       system=settings.budget.total))
    # The card's tenant field is stricter than the store's tenant rule; it only labels explain rows.
    card = Card(id="gateway", tenant=tenant if is_tenant_id(tenant) else "gateway", board=STAGE,
                title="prompt gateway request")
    tenant_prompt = tenant_prompt_for(svc.store, tenant)
    assembler = svc.runtime.assembler
    found: Counter[str] = Counter()
    with _PROMPT_LOCK:
        try:
            prompt = assembler.assemble(AssemblyRequest(
                card=card, stage=None, request_system=parsed.conversation.system_text or None, turn="",
                tenant_prompt=tenant_prompt), settings)
        except AssemblyError as exc:
            raise GatewayError(500, f"gateway prompt configuration: {exc}", code="configuration") from None
        turns = [Turn(t.role, assembler.scrubber.scrub(t.text, found), t.cache) for t in parsed.conversation.turns]
    # The first block is guardrails + behaviour layers; the agent block after it is for card stages.
    system: SystemBlock = prompt.conversation.system[0]
    if turns[0].role == "assistant":
        turns.insert(0, Turn("user", OPENER))
    redactions = sum(found.values()) + sum(prompt.redactions.values())
    return Conversation(system=(system,), turns=tuple(turns)), redactions, parsed.warnings


# Providers whose API refuses a message without text (Anthropic: "text content blocks must be
# non-empty"; Gemini: "an empty text parameter"); OpenAI-compatible servers take one.
_NEED_TEXT = frozenset({"anthropic", "gemini"})


def _blank_message(messages: Any) -> str:
    """The param naming the first user or assistant message with no text ("messages.2.content")."""
    for i, m in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or m.get("tool_calls"):
            continue
        content = m.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        if all(isinstance(p, dict) and p.get("type") == "text" and not str(p.get("text") or "").strip()
               for p in parts):
            return f"messages.{i}.content"
    return "messages"


def prepare(svc: Services, tenant: str, call: GatewayCall) -> Prepared:
    conversation, redactions, warnings = layered_conversation(svc, tenant, call)
    profile_name = svc.config.gateway.profile
    profile = svc.config.profiles[profile_name]
    if profile.provider in _NEED_TEXT and any(not t.text.strip() for t in conversation.turns):
        # Refused here, before the tenant's limits count a call the provider would refuse.
        where = _blank_message(call.body.get("messages"))
        raise invalid(f"{where}: a message has no text, and the gateway's model ({profile.provider}) refuses "
                      "an empty message; nothing was sent", where)
    max_tokens = min(call.max_tokens or profile.max_tokens, profile.max_tokens)
    temperature = call.temperature if call.temperature is not None else profile.temperature
    return Prepared(conversation, redactions, warnings, profile_name, max_tokens, temperature)
