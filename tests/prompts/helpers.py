"""Small builders for prompt-core tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
from cardloop.prompts.card import Card, ContextItem, ContextKind, Message, TenantPrompt, ToolCall
from cardloop.prompts.settings import AssemblySettings, PromptSource, TokenBudget
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def card(**fields: object) -> Card:
    data: dict[str, object] = {"id": "PAY-1", "title": "Retry webhooks", "repo": "acme/api"}
    data.update(fields)
    return Card.model_validate(data)


def chat(n: int, words: int = 40) -> tuple[Message, ...]:
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append(Message(role=role, id=f"m{i}", author="dev" if role == "user" else None,
                           created_at=T0 + timedelta(minutes=i),
                           content=f"message {i}: " + " ".join(f"word{j}" for j in range(words))))
    return tuple(out)


def tool_exchange(i: int) -> tuple[Message, ...]:
    call = ToolCall(id=f"call{i}", name="run_tests", input={"command": f"pytest -q tests/test_{i}.py"})
    return (
        Message(role="assistant", content=f"Running the tests ({i}).", tool_calls=(call,)),
        Message(role="tool", tool_call_id=f"call{i}",
                content=f"FAILED tests/test_{i}.py::test_case - AssertionError: boom {i}\n" * 3),
    )


def item(kind: ContextKind, content: str, source: str = "src") -> ContextItem:
    return ContextItem(kind=kind, source=source, content=content)


def settings(**fields: object) -> AssemblySettings:
    base: dict[str, object] = {"profile_prompt": PromptSource("PROFILE PROMPT", "config profiles.x.system_prompt")}
    base.update(fields)
    return AssemblySettings(**base)  # type: ignore[arg-type]


def assembler(tmp_path: Path | None = None, counter: TokenCounter | None = None) -> PromptAssembler:
    dirs = [tmp_path] if tmp_path else []
    return PromptAssembler(TemplateStore(dirs), counter or TokenCounter())


def assemble(c: Card, stage: Stage | None = Stage.CODING, *, s: AssemblySettings | None = None,
             tmp_path: Path | None = None, summarizer=None, **req: object):
    return assembler(tmp_path).assemble(AssemblyRequest(card=c, stage=stage, **req),  # type: ignore[arg-type]
                                        s or settings(), summarizer)


def total_of(prompt, counter: TokenCounter, overhead: int = 4) -> int:
    """Independent recount of everything the prompt sends."""
    conv = prompt.conversation
    return (sum(counter.count(b.text) + overhead for b in conv.system)
            + sum(counter.count(t.text) + overhead for t in conv.turns))


def cpu_best(fn: Callable[[Any], object], arg: object, reps: int = 5) -> float:
    """The least CPU time of this process over `reps` calls of fn(arg): CPU time, not wall
    time, so waiting for a core on a loaded machine is not counted as the function's cost."""
    best = float("inf")
    for _ in range(reps):
        t = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - t)
    return best


def cpu_pair(fn: Callable[[Any], object], a: object, b: object, reps: int = 5) -> tuple[float, float]:
    """The least CPU time of fn(a) and of fn(b), the calls taken in turn: a busy spell of the
    machine (other test workers, Temporal servers) then slows both sides of a ratio, not one."""
    best_a = best_b = float("inf")
    for _ in range(reps):
        for arg, slot in ((a, 0), (b, 1)):
            t = time.process_time()
            fn(arg)
            took = time.process_time() - t
            if slot == 0:
                best_a = min(best_a, took)
            else:
                best_b = min(best_b, took)
    return best_a, best_b


__all__ = ["T0", "TenantPrompt", "TokenBudget", "assemble", "assembler", "card", "chat", "cpu_best", "cpu_pair", "item",
           "settings", "tool_exchange", "total_of"]
