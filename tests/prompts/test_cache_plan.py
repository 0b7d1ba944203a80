"""Prompts that a provider's prefix cache can serve (issue 10): through a stage run, each turn's
request starts with what the previous turn sent, up to the previous turn's last breakpoint; the
run's context is its own message before the run's turns and stays byte-identical as the run
grows; breakpoints follow the provider's rules (at most four, none under the model's minimum)."""

from __future__ import annotations

from cardloop.prompts.assemble import AssemblyRequest
from cardloop.prompts.card import ContextKind, Message
from cardloop.prompts.formats.render import to_anthropic
from cardloop.prompts.settings import TokenBudget
from cardloop.prompts.stages import Stage
from tests.prompts.helpers import assembler, card, chat, item, settings

BUDGET = TokenBudget(system=1_000, agent=1_500, history=3_000, context=2_000, total=8_000)
CONTEXT = (item(ContextKind.NOTES, "Keep the retry cap at 30 s. " * 40, "notes"),
           item(ContextKind.SOURCE_FILE, "def retry(n):\n    return min(2 ** n, 30)\n" * 60, "app/retry.py"))


def _blocks(body: dict) -> list[str]:
    """Every content block in prefix order, without its cache marker."""
    out = [b["text"] for b in body.get("system", [])]
    for m in body["messages"]:
        out += [f"{m['role']}:{b.get('text', '')}" for b in m["content"]]
    return out


def _marked(body: dict) -> list[int]:
    """Indexes (in _blocks order) of the blocks that carry a breakpoint."""
    flags = [("cache_control" in b) for b in body.get("system", [])]
    flags += [("cache_control" in b) for m in body["messages"] for b in m["content"]]
    return [i for i, f in enumerate(flags) if f]


def _run(iterations: int, *, min_tokens: int = 256):
    """Assemble each turn of a stage run that starts after 40 messages: (prompts, bodies)."""
    a = assembler()
    c = card(history=chat(40, words=30), context=CONTEXT)
    start = len(c.history)
    s = settings(budget=BUDGET, min_cache_tokens=min_tokens)
    prompts, bodies = [], []
    for n in range(1, iterations + 1):
        p = a.assemble(AssemblyRequest(card=c, stage=Stage.CODING, iteration=n, run_start=start), s,
                       lambda req: f"Summary of messages {req.first + 1}-{req.last + 1}.")
        prompts.append(p)
        bodies.append(to_anthropic(p.conversation, model="m", max_tokens=100))
        reply = Message(role="assistant", content=f"Turn {n}: edited app/retry.py; " + "details " * 120)
        c = c.model_copy(update={"history": (*c.history, reply)})
    return prompts, bodies


def _fold(prompt) -> str:
    return next((t.text for t in prompt.conversation.turns if "<conversation_summary" in t.text), "")


def test_each_turn_extends_the_prefix_the_previous_turn_wrote() -> None:
    prompts, bodies = _run(12)
    steps = 0
    for n in range(1, len(bodies)):
        b, a = _blocks(bodies[n - 1]), _blocks(bodies[n])
        written = max(_marked(bodies[n - 1]))  # the previous turn's longest breakpoint
        if _fold(prompts[n]) != _fold(prompts[n - 1]):
            steps += 1  # the history passed its budget: the fold moved one step
            continue
        assert a[: written + 1] == b[: written + 1], "the next turn must resend the written prefix unchanged"
        assert written in _marked(bodies[n]), "and read it at a breakpoint of its own"
    assert all(_fold(p) for p in prompts), "the history is folded from the first turn on"
    assert steps <= 3, "the fold moves in steps, not every turn"
    for p, body in zip(prompts, bodies, strict=True):
        assert len(_marked(body)) <= 4
        assert sum(p.sections.values()) <= BUDGET.total


def test_the_run_context_sits_before_the_runs_turns_and_never_changes() -> None:
    prompts, _ = _run(8)
    texts = []
    for n, p in enumerate(prompts):
        turns = p.conversation.turns
        at = next(i for i, t in enumerate(turns) if "Keep the retry cap" in t.text)
        texts.append(turns[at].text)
        after = list(turns[at + 1: -1])
        assert all(t.text.startswith("Turn ") for t in after), "only the run's own turns follow the context"
        assert len(after) == min(n, len(after))
        assert "Keep the retry cap" not in turns[-1].text, "the current turn stays on its own at the end"
    assert len(set(texts)) == 1
    assert {p.sections["context"] for p in prompts} == {prompts[0].sections["context"]}


def test_without_a_run_the_context_joins_the_current_turn() -> None:
    c = card(history=chat(6), context=CONTEXT)
    p = assembler().assemble(AssemblyRequest(card=c, stage=Stage.CODING), settings(budget=BUDGET, min_cache_tokens=0))
    assert "Keep the retry cap" in p.conversation.turns[-1].text


def test_breakpoints_under_the_models_minimum_are_not_placed() -> None:
    prompts, bodies = _run(2, min_tokens=10**6)
    assert all(not _marked(b) for b in bodies)
    marks = prompts[1].explain()["cache_breakpoints"]
    assert marks and {m["status"] for m in marks} == {"below minimum"}
    kinds = [m["kind"] for m in marks]
    assert kinds[0] == "system" and "context" in kinds


def test_explain_names_each_breakpoint_and_what_stays_stable() -> None:
    prompts, _ = _run(3)
    marks = prompts[2].explain()["cache_breakpoints"]
    placed = [m for m in marks if m["status"] == "breakpoint"]
    assert 1 <= len(placed) <= 4
    assert {"previous", "last"} <= {m["kind"] for m in placed}
    assert all(m["stable_for"] for m in marks)
    assert [m["prefix_tokens"] for m in marks] == sorted(m["prefix_tokens"] for m in marks)
