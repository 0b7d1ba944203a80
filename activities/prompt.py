"""prompt.assemble and config.stage: local activities over the store and the prompt core."""

from __future__ import annotations

import json
from typing import Any

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import card_not_found, config_error, invalid_input
from cardloop.prompts.assemble import AssembledPrompt, AssemblyError, AssemblyRequest
from cardloop.prompts.conversation import Conversation, SystemBlock, Turn
from cardloop.prompts.history import FoldRequest
from cardloop.prompts.stages import parse_stage
from temporalio import activity

from cardloop.contracts.errors import ConfigError
from cardloop.contracts.payloads import AssembleInput, AssembleResult, FoldNeeded, StageSettings


class SummaryPending(Exception):
    """No cached summary covers the folded range yet: assemble truncated, ask for one."""


def prompt_payload(prompt: AssembledPrompt) -> dict[str, Any]:
    s = prompt.settings
    conv = prompt.conversation
    return {
        "profile": s.profile, "provider": s.provider, "format": s.format, "model": s.model,
        "max_tokens": s.max_tokens, "temperature": s.temperature,
        "system": [{"text": b.text, "cache": b.cache} for b in conv.system],
        "turns": [{"role": t.role, "text": t.text, "cache": t.cache} for t in conv.turns],
        "tokens": prompt.sections,
    }


def conversation_from(payload: dict[str, Any]) -> Conversation:
    return Conversation(
        system=tuple(SystemBlock(b["text"], b["cache"]) for b in payload["system"]),
        turns=tuple(Turn(t["role"], t["text"], t["cache"]) for t in payload["turns"]),
    )


class PromptActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name="config.stage")
    def stage_settings(self, stage: str) -> StageSettings:
        try:
            st = parse_stage(stage)
        except ValueError as exc:
            raise invalid_input(str(exc)) from None
        cfg = self.rt.config.stage(st)
        return StageSettings(profile=cfg.profile, max_iterations=cfg.max_iterations,
                             token_budget=cfg.token_budget, auto_advance=cfg.auto_advance,
                             next_stage=cfg.next, sources=self.rt.config.sources_for(st))

    @activity.defn(name="prompt.assemble")
    def assemble(self, inp: AssembleInput) -> AssembleResult:
        rt = self.rt
        card = rt.store.get_card(inp.card_key)
        if card is None:
            raise card_not_found(inp.card_key)
        # The tenant's prompt managed through the API (the store) wins over one a card file carries.
        stored = rt.store.current_tenant_prompt(card.tenant)
        try:
            stage = parse_stage(inp.stage)
            settings = rt.config.assembly_settings(stage, inp.profile)
        except (ValueError, ConfigError) as exc:
            raise config_error(str(exc)) from None
        summary_model = rt.config.profiles[rt.config.summarizer.profile].model
        fold: list[FoldNeeded] = []

        def cached_summary(req: FoldRequest) -> str:
            hit = rt.store.find_summary(inp.card_key, req.first, req.last, summary_model)
            if hit is not None:
                return hit.text
            fold.append(FoldNeeded(first=req.first, last=req.last, max_tokens=req.max_tokens))
            raise SummaryPending(f"messages {req.first + 1}-{req.last + 1} not summarized yet")

        try:
            prompt = rt.assembler.assemble(
                AssemblyRequest(card=card, stage=stage, iteration=inp.iteration,
                                tenant_prompt=stored.prompt if stored is not None else None),
                settings, cached_summary)
        except AssemblyError as exc:
            raise config_error(str(exc)) from None
        payload = json.dumps(prompt_payload(prompt), ensure_ascii=False)
        ref = rt.store.put_blob(card.tenant, payload, "prompt")
        return AssembleResult(prompt_ref=ref, tokens=prompt.sections, total_tokens=prompt.total_tokens,
                              history_mode=prompt.history_mode, fold=fold[0] if fold else None,
                              redactions=sum(prompt.redactions.values()))
