"""prompt.assemble and config.stage: local activities over the store and the prompt core."""

from __future__ import annotations

import json
from typing import Any

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import config_error, invalid_input, stored_card
from cardloop.activities.workspace import tool_specs
from cardloop.contracts import names
from cardloop.contracts.config import WRITE_TOOLS, Config, research_settings
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.payloads import AssembleInput, AssembleResult, FoldNeeded, StageSettings
from cardloop.prompts.assemble import AssemblyError, AssemblyRequest
from cardloop.prompts.history import Fold, FoldRequest
from cardloop.prompts.stages import Stage, parse_stage


class PromptActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name=names.STAGE_SETTINGS)
    def stage_settings(self, stage: str) -> StageSettings:
        try:
            st = parse_stage(stage)
        except ValueError as exc:
            raise invalid_input(str(exc)) from None
        cfg = self.rt.config.stage(st)
        retry = self.rt.config.retry
        after = retry.auto_retry_after if cfg.auto_retry_after is None else cfg.auto_retry_after
        return StageSettings(profile=cfg.profile, max_iterations=cfg.max_iterations,
                             token_budget=cfg.token_budget, auto_advance=cfg.auto_advance,
                             next_stage=cfg.next, sources=self.rt.config.sources_for(st),
                             auto_retry_after=after, auto_retries=retry.auto_retries if after > 0 else 0,
                             assemble_timeout=self.rt.config.temporal.assemble_timeout,
                             cost_budget_usd=cfg.cost_budget_usd, **_agent_settings(self.rt.config, st),
                             **_research_settings(self.rt.config, st))

    @activity.defn(name=names.ASSEMBLE)
    def assemble(self, inp: AssembleInput) -> AssembleResult:
        rt = self.rt
        card = stored_card(rt.store, inp.card_key)
        # The tenant's prompt managed through the API (the store) wins over one a card file carries.
        stored = rt.store.current_tenant_prompt(card.tenant)
        try:
            stage = parse_stage(inp.stage)
            settings = rt.config.assembly_settings(stage, inp.profile)
        except (ValueError, ConfigError) as exc:
            raise config_error(str(exc)) from None
        summary_model = rt.config.profiles[rt.config.summarizer.profile].model

        def cached_summary(req: FoldRequest) -> str | None:
            hit = rt.store.find_summary(inp.card_key, req.first, req.last, summary_model)
            return hit.text if hit is not None else None

        # This run's messages carry its workflow id in their dedup keys (replies, tool results):
        # the first of them is where the run's turns begin, after the run's context.
        run_start = rt.store.first_seq_under(inp.card_key, f"{inp.run_key}/") if inp.run_key else None
        try:
            prompt = rt.assembler.assemble(
                AssemblyRequest(card=card, stage=stage, iteration=inp.iteration,
                                tenant_prompt=stored.prompt if stored is not None else None,
                                tools=tool_specs(inp.tools),
                                run_start=None if not inp.run_key else run_start if run_start is not None
                                else len(card.history)),
                settings, cached_summary)
        except AssemblyError as exc:
            raise config_error(str(exc)) from None
        payload = json.dumps(prompt.payload(), ensure_ascii=False)
        ref = rt.store.put_blob(card.tenant, payload, "prompt")
        return AssembleResult(prompt_ref=ref, tokens=prompt.sections, total_tokens=prompt.total_tokens,
                              history_mode=prompt.history_mode, fold=_fold(prompt.fold_needed),
                              redactions=sum(prompt.redactions.values()))


def _agent_settings(config: Config, stage: Stage) -> dict[str, object]:
    """The coding agent's part of the stage's settings: no tools unless [workspace] is enabled.
    A stage that may write must show evidence for COMPLETE (the repository's tests pass)."""
    ws = config.workspace
    tools = ws.tools_for(stage) if ws.enabled else []
    return {"tools": tools, "verify": bool(WRITE_TOOLS.intersection(tools)), "stuck_repeats": ws.stuck_repeats,
            "stuck_turns": ws.stuck_turns, "affinity_timeout": ws.affinity_timeout,
            "pull_request": bool(tools) and stage in ws.pull_requests, "comment": bool(tools) and ws.comments,
            "ci_wait_seconds": ws.ci_wait_seconds if tools and stage in ws.ci_stages else 0.0,
            "ci_poll_seconds": ws.ci_poll_seconds, "ci_none_grace_seconds": ws.ci_none_grace_seconds}


def _fold(needed: Fold | None) -> FoldNeeded | None:
    return None if needed is None else FoldNeeded(first=needed.first, last=needed.last, max_tokens=needed.max_tokens)


def _research_settings(config: Config, stage: Stage) -> dict[str, Any]:
    """A stage in [research] stages researches gathered logs over auto_min_tokens (0: over the
    stage's context budget, i.e. a log no excerpt can do justice to); a stage whose tools include
    research answers the agent's questions. Either needs the research settings."""
    r = config.research
    auto = stage in r.stages
    if not auto and "research" not in config.workspace.tools_for(stage):
        return {}
    return {"research_min_tokens": (r.auto_min_tokens or config.budget_for(stage).context) if auto else 0,
            "research": research_settings(config)}
