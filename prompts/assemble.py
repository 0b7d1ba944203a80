"""Assembling a stage prompt for a card, in the fixed order:

    system (guardrails + behaviour) | agent prompt | chat history | other context | current turn

Each section is fitted into its budget from settings; the total is never exceeded: the
sections are charged in order against what the total leaves, so a small total squeezes
history and context first. Every layer, section and item leaves an `explain` row.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cardloop.prompts.cache_plan import CacheMark, plan_cache
from cardloop.prompts.card import Card, TenantPrompt
from cardloop.prompts.context import RECENT_KEYS, SEAM_TOKENS, ContextFit, ContextFitter
from cardloop.prompts.conversation import Conversation, SystemBlock, ToolSpec, Turn
from cardloop.prompts.excerpt_cache import ExcerptCache
from cardloop.prompts.explain import ExplainRow
from cardloop.prompts.formats import render
from cardloop.prompts.history import (
    Fold,
    HistoryFitter,
    MessageCache,
    Summarizer,
    results_after_calls,
    settle_tool_calls,
    truncate_tokens,
)
from cardloop.prompts.layers import GLOBAL_TEMPLATE, GUARDRAILS_TEMPLATE, resolve_behaviour
from cardloop.prompts.scrub import Found, Scrubber, in_item
from cardloop.prompts.settings import AssemblySettings, PromptSource
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter

TURN_TEMPLATE = "turn"
# Room always kept for the current turn: a prompt without a user turn cannot be sent.
MIN_TURN_TOKENS = 48
# Texts PromptAssembler._prompt_count keeps: the few that each stage and tenant sends every turn.
PROMPT_COUNTS = 512
PROMPT_COUNT_CHARS = 16_000


class AssemblyError(ValueError):
    """The prompt cannot be assembled with these settings (a configuration problem)."""


@dataclass(frozen=True, slots=True)
class AssemblyRequest:
    card: Card
    stage: Stage | None
    iteration: int = 1
    # Request-level system messages (the prompt gateway): the highest behaviour layer.
    request_system: str | None = None
    # The current turn's instruction; default: the `turn` template.
    turn: str | None = None
    # Overrides the card's own tenant_prompt (the service passes the stored one).
    tenant_prompt: TenantPrompt | None = None
    # The tools the model may call (the coding agent's workspace tools), sent natively.
    tools: tuple[ToolSpec, ...] = ()
    # A stage run's first message in the card's history (its length when the run has none yet).
    # Set: the context is its own message just before the run's turns, fitted to a budget that
    # does not depend on how full the history is, so every turn of the run extends one stable
    # prefix (system, agent, history before the run, context) that the provider caches. Unset
    # (gateway, explain of a card): the context joins the current turn at the end.
    run_start: int | None = None


@dataclass(frozen=True, slots=True)
class AssembledPrompt:
    conversation: Conversation
    rows: tuple[ExplainRow, ...]
    sections: dict[str, int]
    budget: dict[str, int]
    settings: AssemblySettings
    stage: Stage | None
    history_mode: str
    redactions: dict[str, int] = field(default_factory=dict)
    # Which item held each redacted secret: ({"item", "rule", "count"}, ...).
    redacted_in: tuple[dict[str, Any], ...] = ()
    # The history fold this prompt needed and the summarizer had no summary for (it was truncated).
    fold_needed: Fold | None = None
    # Where the cache breakpoints are, and which candidates were dropped (below the minimum, over 4).
    cache: tuple[CacheMark, ...] = ()

    @property
    def total_tokens(self) -> int:
        return sum(self.sections.values())

    def payload(self) -> dict[str, Any]:
        """What the model call needs, as JSON-ready values (the service stores it as a blob)."""
        s = self.settings
        return {"profile": s.profile, "provider": s.provider, "format": s.format, "model": s.model,
                "max_tokens": s.max_tokens, "temperature": s.temperature,
                **self.conversation.to_payload(), "tokens": self.sections}

    def render(self, fmt: str | None = None) -> dict[str, Any] | str:
        s = self.settings
        return render(self.conversation, fmt or s.format, model=s.model or None,
                      max_tokens=s.max_tokens, temperature=s.temperature)

    def explain(self) -> dict[str, Any]:
        return {
            "stage": self.stage.value if self.stage else None,
            "profile": self.settings.profile,
            "provider": self.settings.provider,
            "model": self.settings.model,
            "history_mode": self.history_mode,
            "tokens": {**self.sections, "total": self.total_tokens},
            "budget": self.budget,
            "calibration_note": "tokens are cl100k_base counts times the model's calibration factor",
            "redactions": self.redactions,
            "redacted_in": list(self.redacted_in),
            "cache_breakpoints": [m.to_dict() for m in self.cache],
            "rows": [r.to_dict() for r in self.rows],
        }


class PromptAssembler:
    """Holds the caches (token counts, redactions, excerpts) that make re-assembly cheap."""

    def __init__(self, templates: TemplateStore, counter: TokenCounter,
                 scrubber: Scrubber | None = None) -> None:
        self.templates = templates
        self.counter = counter
        self.scrubber = scrubber or Scrubber()
        self._messages = MessageCache()
        self._lock = threading.RLock()
        self._excerpts = ExcerptCache()
        self._facts: dict[tuple[int, ...], dict[str, list[str]]] = {}
        self._pinned: dict[tuple[object, ...], str] = {}
        self._context_fits: OrderedDict[bytes, tuple[ContextFit, Counter[str]]] = OrderedDict()
        self._context_keys: deque[tuple[tuple[str | None, ...], bytes]] = deque(maxlen=RECENT_KEYS)
        self._prompt_counts: dict[tuple[float, str], int] = {}

    def _prompt_count(self, counter: TokenCounter) -> Callable[[str], int]:
        """counter.count for the texts every assembly counts again (guardrails, behaviour layers,
        the system and agent texts, the current turn): kept by the text itself, without the
        counter's digest of it, in a small memo (at most PROMPT_COUNTS texts of PROMPT_COUNT_CHARS)
        that is emptied when full."""
        memo, calibration = self._prompt_counts, counter.calibration

        def count(text: str) -> int:
            if len(text) > PROMPT_COUNT_CHARS:  # a request's own long text: not worth keeping
                return counter.count(text)
            key = (calibration, text)
            n = memo.get(key)
            if n is None:
                if len(memo) >= PROMPT_COUNTS:
                    memo.clear()
                n = memo[key] = counter.count(text)
            else:
                counter.stats.hits += 1  # a count served from a cache, as the counter's would be
            return n
        return count

    def guardrails(self) -> str:
        return self.templates.load(GUARDRAILS_TEMPLATE).text.strip()

    def check(self, settings: AssemblySettings) -> list[str]:
        """Problems that make every assembly with `settings` impossible (start-up check)."""
        problems = list(settings.budget.problems())
        counter = self.counter.with_calibration(settings.calibration)
        guard = counter.count(self.guardrails()) + settings.message_overhead
        if guard > settings.budget.system:
            problems.append(f"system ({settings.budget.system:,}) is smaller than the core "
                            f"guardrails ({guard:,} tokens); raise it")
        elif guard + MIN_TURN_TOKENS > settings.budget.total:
            problems.append(f"total ({settings.budget.total:,}) leaves no room for a turn after the "
                            f"core guardrails ({guard:,} tokens); raise it")
        return problems

    def assemble(self, request: AssemblyRequest, settings: AssemblySettings,
                 summarizer: Summarizer | None = None) -> AssembledPrompt:
        # The caches are plain dicts shared by every caller of this assembler (worker threads,
        # API requests): one assembly at a time. Assembly is CPU-bound, so little is lost.
        with self._lock:
            return self._assemble(request, settings, summarizer)

    def _assemble(self, request: AssemblyRequest, settings: AssemblySettings,
                  summarizer: Summarizer | None) -> AssembledPrompt:
        counter = self.counter.with_calibration(settings.calibration)
        count = self._prompt_count(counter)
        budget = settings.budget
        overhead = settings.message_overhead
        found = Found()
        rows: list[ExplainRow] = []
        card = request.card

        # 1. System: guardrails, then the behaviour layers by precedence.
        guard_tpl = self.templates.load(GUARDRAILS_TEMPLATE)
        guard = guard_tpl.text.strip()
        guard_cost = count(guard) + overhead
        system_cap = min(budget.system, budget.total - MIN_TURN_TOKENS)
        if guard_cost > system_cap:
            raise AssemblyError(f"budget.system ({budget.system:,}, total {budget.total:,}) leaves "
                                f"no room for the core guardrails ({guard_cost:,} tokens) and a turn")
        rows.append(ExplainRow("system", "core guardrails", _where(guard_tpl), "used", guard_cost - overhead,
                               "immutable, always first"))
        global_prompt = None
        if self.templates.exists(GLOBAL_TEMPLATE):
            g = self.templates.load(GLOBAL_TEMPLATE)
            global_prompt = PromptSource(g.text, _where(g))
        tenant = request.tenant_prompt or card.tenant_prompt
        in_item(found, "request system prompt")
        request_system = self.scrubber.scrub(request.request_system or "", found) or None
        in_item(found, "tenant prompt")
        if tenant is not None:
            tenant = tenant.model_copy(update={
                "custom_system_prompt": self.scrubber.scrub(tenant.custom_system_prompt, found)})
        resolved = resolve_behaviour(settings=settings, global_prompt=global_prompt, tenant=tenant,
                                     tenant_id=card.tenant, request_system=request_system)
        system_text = guard
        used_system = guard_cost
        layer_tokens: dict[str, tuple[int, str]] = {}
        for cand in (resolved.base, resolved.appended):
            if cand is None:
                continue
            piece = "\n\n" + cand.text
            room = system_cap - used_system - SEAM_TOKENS
            cost = count(piece)
            note = ""
            if cost > room:
                piece = truncate_tokens(piece, max(room, 0), counter) if room > 0 else ""
                cost = counter.count(piece)
                note = f"cut to fit the system budget ({system_cap:,})"
            if piece.strip():
                system_text += piece
                used_system += cost + SEAM_TOKENS
            else:
                note = "no room left in the system budget"
            layer_tokens[cand.name] = (cost if piece.strip() else 0, note)
        # Exact count of what is actually sent (the joined text), never the parts' estimate.
        used_system = count(system_text) + overhead
        for row in resolved.rows:
            tokens, note = layer_tokens.get(row.name, (0, "")) if row.status == "used" else (0, "")
            status = row.status
            if note:
                status = "cut" if tokens else "dropped"
            rows.append(ExplainRow(row.section, row.name, row.source, status, tokens,
                                   note or row.reason))

        # 2. The stage's agent prompt.
        agent_name = f"agents/{request.stage.value}" if request.stage else "agents/default"
        if not self.templates.exists(agent_name):
            agent_name = "agents/default"
        agent_tpl = self.templates.load(agent_name)
        agent_text = agent_tpl.render({
            "stage": request.stage.value if request.stage else "general",
            "iteration": request.iteration, "max_iterations": settings.max_iterations,
        })
        agent_budget = min(budget.agent, budget.total - used_system - MIN_TURN_TOKENS)
        agent_cost = count(agent_text) + overhead
        agent_status, agent_note = "used", f"stage {request.stage.value if request.stage else 'default'}"
        if agent_cost > agent_budget:
            agent_text = truncate_tokens(agent_text, max(agent_budget - overhead, 0), counter)
            agent_cost = counter.count(agent_text) + overhead if agent_text else 0
            agent_status, agent_note = "cut", f"cut to fit the agent budget ({agent_budget:,})"
        rows.append(ExplainRow("agent", agent_name, _where(agent_tpl), agent_status,
                               agent_cost, agent_note))

        # 3. The current turn is charged before history and context: it must always fit.
        turn_text = request.turn
        turn_source = "request"
        if turn_text is None:
            turn_tpl = self.templates.load(TURN_TEMPLATE)
            turn_source = _where(turn_tpl)
            turn_text = turn_tpl.render({
                "stage": request.stage.value if request.stage else "general",
                "iteration": request.iteration, "max_iterations": settings.max_iterations})
        else:
            in_item(found, "current turn")
            turn_text = self.scrubber.scrub(turn_text, found)
        left = budget.total - used_system - agent_cost
        # Tool definitions are sent with every request: they count against the total first.
        tools_cost = sum(counter.count(f"{t.name} {t.description} {json.dumps(dict(t.input_schema), sort_keys=True)}")
                         + overhead for t in request.tools)
        if tools_cost:
            rows.append(ExplainRow("tools", f"{len(request.tools)} tool definitions", "workspace tools", "used",
                                   tools_cost, ", ".join(t.name for t in request.tools)))
        left -= tools_cost
        turn_cap = max(MIN_TURN_TOKENS, left // 4)
        turn_cost = count(turn_text) + overhead
        turn_row = ExplainRow("turn", "current turn", turn_source, "used", turn_cost)
        if turn_cost > turn_cap:
            turn_text = truncate_tokens(turn_text, max(turn_cap - overhead, 0), counter)
            turn_cost = counter.count(turn_text) + overhead
            turn_row = ExplainRow("turn", "current turn", turn_source, "cut", turn_cost,
                                  f"cut to a quarter of what the total leaves ({turn_cap:,})")
        left -= turn_cost

        # 4. Chat history.
        before_history = left
        # Reserve room for an opening user line in case the kept history starts with the agent.
        opener = Turn("user", "(The card's conversation continues.)")
        opener_cost = count(opener.text) + overhead
        history_budget = max(0, min(budget.history, left) - opener_cost)
        history = HistoryFitter(counter, self.scrubber, settings.history, overhead, self._messages, self._facts,
                                self._pinned).fit(
            settle_tool_calls(card.history), history_budget, summarizer, found)
        rows.extend(history.rows)
        needs_opener = bool(history.turns) and history.turns[0].role == "assistant"
        left -= history.tokens + (opener_cost if needs_opener else 0)

        # 5. Other context: its own message before the run's turns, or joined with the current turn.
        in_run = request.run_start is not None
        # In a run the context's room is what the history's whole budget leaves, not what this
        # turn's history happens to leave: the context then stays byte-identical while the run grows.
        seam = overhead if in_run else SEAM_TOKENS
        room = before_history - min(budget.history, before_history) if in_run else left
        context_budget = max(0, min(budget.context, room - seam))
        context = ContextFitter(counter, self.scrubber, settings.context, self._excerpts, self._context_fits,
                                self._context_keys).fit(
            card, request.stage, context_budget, found)
        rows.extend(context.rows)
        context_cost = context.tokens + (seam if context.blocks else 0)
        rows.append(turn_row)

        turns, costs = results_after_calls(history.turns, history.costs)
        history_cost = history.tokens
        if needs_opener:
            # Providers want the conversation to open with the user.
            turns.insert(0, opener)
            costs.insert(0, opener_cost)
            history_cost += opener_cost
        marks = {i: "fold" for i, t in enumerate(turns) if t.cache}  # the history's folded block
        if in_run and context.blocks:
            at = _run_position(len(card.history), request.run_start or 0, history.tail_from, len(turns))
            turns.insert(at, Turn("user", "\n\n".join(context.blocks)))
            costs.insert(at, context_cost)
            marks = {(i + 1 if i >= at else i): kind for i, kind in marks.items()}
            marks[at] = "context"
        if turns:
            # The history changes only at its end: its last turn writes the prefix the next turn
            # starts with; the end of what the previous turn sent (the turn before the newest
            # assistant reply) reads what that turn wrote.
            newest_reply = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=-1)
            if newest_reply > 0:
                marks.setdefault(newest_reply - 1, "previous")
            marks.setdefault(len(turns) - 1, "last")
        last = turn_text if in_run else "\n\n".join([*context.blocks, turn_text])
        system_blocks, turns, cache_marks = plan_cache(
            (SystemBlock(system_text), SystemBlock(agent_text)), turns, costs, marks, prefix_tokens=tools_cost,
            counter=counter, overhead=overhead, min_tokens=settings.min_cache_tokens,
            system_costs=(used_system, agent_cost if agent_text else 0))  # both counted above
        turns.append(Turn("user", last))
        conversation = Conversation(system=tuple(b for b in system_blocks if b.text), turns=tuple(turns),
                                    tools=request.tools)
        sections = {"system": used_system, "agent": agent_cost, "history": history_cost,
                    "context": context_cost, "turn": turn_cost}
        if tools_cost:
            sections["tools"] = tools_cost
        return AssembledPrompt(
            conversation=conversation, rows=tuple(rows), sections=sections,
            budget={"system": budget.system, "agent": budget.agent, "history": budget.history,
                    "context": budget.context, "total": budget.total},
            settings=settings, stage=request.stage, history_mode=history.mode,
            redactions=dict(found), redacted_in=tuple(found.items_list()), fold_needed=history.fold_needed,
            cache=cache_marks,
        )


def _run_position(n: int, run_start: int, tail_from: int, n_turns: int) -> int:
    """Where the run's context goes among the fitted history turns: just before the run's first
    message, or right after the folded part when the fold has taken the run's first messages."""
    return n_turns - (n - max(min(run_start, n), tail_from))


def _where(template: Any) -> str:
    return f"{template.origin} template {template.name}"
