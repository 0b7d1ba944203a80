"""Assembly scenarios whose prompts must stay byte-identical when assembly gets faster.

Each case assembles a card (the bundled sample, the benchmark's 200-message card, cards holding
the fixture logs) at a stage and budget and reduces the prompt to a digest of everything it
sends and reports (payload and explain). tests/prompts/test_assembly_golden.py compares the
digests with those recorded in fixtures/assembly_golden.json; regenerate that file with
`.venv/bin/python -m tests.prompts.assembly_cases` only when a change is meant to alter prompts.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

from cardloop.prompts.assemble import AssembledPrompt, AssemblyRequest, PromptAssembler
from cardloop.prompts.card import Card, ContextItem, ContextKind, Message, ToolCall
from cardloop.prompts.history import FoldRequest
from cardloop.prompts.settings import AssemblySettings, TokenBudget
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE = ROOT / "examples" / "card.json"
LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
GOLDEN = Path(__file__).resolve().parent / "fixtures" / "assembly_golden.json"

BENCH_BUDGET = TokenBudget(system=1_000, agent=1_500, history=22_000, context=16_000, total=42_000)
BUDGETS = {
    "default": TokenBudget(),
    "bench": BENCH_BUDGET,
    "tight": TokenBudget(system=1_000, agent=600, history=2_500, context=2_500, total=7_000),
    "tiny": TokenBudget(system=700, agent=200, history=300, context=400, total=1_700),
}


def sample_card() -> Card:
    return Card.model_validate_json(SAMPLE.read_text())


def long_card(n: int = 200) -> Card:
    """The benchmark's card (bench/assemble.py): n distinct messages cycled from the sample's."""
    sample = sample_card()
    plain = [m for m in sample.history if not m.tool_calls and m.role != "tool"]
    history = []
    for i in range(n):
        src = plain[i % len(plain)]
        role = "user" if i % 2 == 0 else "assistant"
        history.append(Message(role=role, id=f"b{i}", author=src.author if role == "user" else None,
                               created_at=src.created_at + timedelta(days=i // len(plain)) if src.created_at else None,
                               content=f"[{i}] {src.content}"))
    return sample.model_copy(update={"history": tuple(history)})


def log_card(name: str) -> Card:
    text = (LOGS / name).read_text()
    return sample_card().model_copy(update={"context": (
        ContextItem(kind=ContextKind.BUILD_LOG, source=f"ci/{name}", title=name, content=text),
        ContextItem(kind=ContextKind.POD_LOG, source=f"k8s/{name}", content=text[len(text) // 3:]),
        ContextItem(kind=ContextKind.SOURCE_FILE, source="src/app.py", content=text[:5_000]),
        ContextItem(kind=ContextKind.TEST_RESULT, source="junit", content=text[-3_000:]),
    )})


def secrets_card() -> Card:
    """Secrets in a tool call's input, its message's text, a tool result and a context item: which
    rules fire, in what order, and in which item, is part of what explain shows."""
    token, aws = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8", "AKIA" + "Q3EXAMPLE7KEY5ID"
    call = ToolCall(id="call1", name="run", input={"command": f"GH_TOKEN={token} gh pr view 57"})
    history = (
        Message(role="user", author="dana", content=f"The deploy key is {aws}, rotate it."),
        Message(role="assistant", content=f"Using aws key {aws} and token {token}.", tool_calls=(call,)),
        Message(role="tool", tool_call_id="call1", content=f"error: bad credentials for {token}\n" * 3),
        Message(role="user", author="dana", content="Thanks."),
    )
    return sample_card().model_copy(update={"history": history, "context": (
        ContextItem(kind=ContextKind.BUILD_LOG, source="ci", content=f"export AWS_ACCESS_KEY_ID={aws}\nok\n"),
    )})


def summarizer(request: FoldRequest) -> str:
    return f"Summary of messages {request.first + 1}-{request.last + 1}: retries, caps and a failing test."


def digest(prompt: AssembledPrompt) -> str:
    data = {"payload": prompt.payload(), "explain": prompt.explain()}
    # Keys in the order the code makes them: explain's dicts (redactions) are shown in that order.
    return hashlib.sha256(json.dumps(data, default=str).encode()).hexdigest()


Case = Callable[[], list[AssembledPrompt]]


def _one(card: Card, stage: Stage | None, budget: TokenBudget, *, calibration: float = 1.0,
         fold: bool = False, run_start: int | None = None, context_cap: int | None = None) -> Case:
    def run() -> list[AssembledPrompt]:
        s = AssemblySettings(budget=budget, calibration=calibration)
        if context_cap is not None:
            s = AssemblySettings(budget=budget, calibration=calibration,
                                 context=type(s.context)(max_item_tokens=context_cap))
        assembler = PromptAssembler(TemplateStore(), TokenCounter())
        request = AssemblyRequest(card=card, stage=stage, run_start=run_start)
        first = assembler.assemble(request, s, summarizer if fold else None)
        # The same assembler again after one more message: the warm path must send the same
        # bytes as a cold assembly of the grown card.
        grown = card.model_copy(update={"history": (*card.history, Message(
            role="user", author="dana", content="One more thing: log the attempt number."))})
        grown_request = AssemblyRequest(card=Card.model_validate_json(grown.model_dump_json()), stage=stage,
                                        run_start=run_start)
        warm = assembler.assemble(grown_request, s, summarizer if fold else None)
        cold = PromptAssembler(TemplateStore(), TokenCounter()).assemble(grown_request, s,
                                                                         summarizer if fold else None)
        return [first, warm, cold]
    return run


def cases() -> Iterator[tuple[str, Case]]:
    sample, long = sample_card(), long_card()
    for name in ("default", "tiny"):
        yield f"secrets/{name}", _one(secrets_card(), Stage.CODING, BUDGETS[name])
    for stage in (*Stage, None):
        for name in ("default", "tight", "tiny"):
            yield f"sample/{stage.value if stage else 'none'}/{name}", _one(sample, stage, BUDGETS[name])
    yield "sample/error_fixing/default/calibrated", _one(sample, Stage.ERROR_FIXING, BUDGETS["default"],
                                                        calibration=1.3)
    for name in ("bench", "default", "tight"):
        yield f"long/{name}", _one(long, Stage.ERROR_FIXING, BUDGETS[name])
        yield f"long/{name}/fold", _one(long, Stage.ERROR_FIXING, BUDGETS[name], fold=True)
        yield f"long/{name}/run", _one(long, Stage.ERROR_FIXING, BUDGETS[name], run_start=190)
    yield "long/bench/calibrated", _one(long, Stage.CODING, BUDGETS["bench"], calibration=1.15)
    for log in sorted(p.name for p in LOGS.iterdir()):
        card = log_card(log)
        for cap in (150, 700, 2_500, 6_000):
            yield f"log/{log}/{cap}", _one(card, Stage.ERROR_FIXING, BUDGETS["bench"], context_cap=cap)
        yield f"log/{log}/tight", _one(card, Stage.ERROR_FIXING, BUDGETS["tight"])
        yield f"log/{log}/calibrated", _one(card, Stage.ERROR_FIXING, BUDGETS["default"], calibration=1.2)


def digests() -> dict[str, list[str]]:
    return {name: [digest(p) for p in case()] for name, case in cases()}


if __name__ == "__main__":
    out = digests()
    GOLDEN.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(out)} cases to {GOLDEN}", file=sys.stderr)
