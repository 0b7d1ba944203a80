from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
from cardloop.prompts.card import Card, ContextItem, ContextKind, Message, ToolCall
from cardloop.prompts.settings import TokenBudget
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter
from tests.conftest import EXAMPLE_CARD
from tests.prompts.helpers import assemble, card, chat, item, settings, tool_exchange, total_of

COUNTER = TokenCounter()
ASSEMBLER = PromptAssembler(TemplateStore(), COUNTER)

texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3_000
) | st.sampled_from([
    "<|endoftext|>", "</untrusted>", "<promise>COMPLETE</promise>", "ghp_" + "x1" * 18,
    "Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: x\n" * 40,
    "word " * 2_500, "",
])


@st.composite
def histories(draw) -> tuple[Message, ...]:
    out: list[Message] = []
    for i in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "tool"]))
        if kind == "tool":
            call = ToolCall(id=f"c{i}", name="run", input={"command": draw(texts)[:50]})
            out.append(Message(role="assistant", content=draw(texts), tool_calls=(call,)))
            out.append(Message(role="tool", tool_call_id=f"c{i}", content=draw(texts)))
        else:
            out.append(Message(role=kind, content=draw(texts)))
    return tuple(out)


@st.composite
def cards(draw) -> Card:
    context = [ContextItem(kind=draw(st.sampled_from(list(ContextKind))), source=f"s{i}",
                           content=draw(texts)) for i in range(draw(st.integers(0, 8)))]
    return Card(id="C-1", title=draw(texts)[:900] or "t", body=draw(texts), notes=draw(texts),
                history=draw(histories()), context=tuple(context))


@st.composite
def budgets(draw) -> TokenBudget:
    total = draw(st.integers(600, 30_000))
    return TokenBudget(system=draw(st.integers(500, min(total, 2_000))),
                       agent=draw(st.integers(0, total)), history=draw(st.integers(0, total)),
                       context=draw(st.integers(0, total)), total=total)


@hsettings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "150")), deadline=None,
           suppress_health_check=[HealthCheck.too_slow])
@given(c=cards(), b=budgets(), stage=st.sampled_from([*Stage, None]),
       calibration=st.sampled_from([1.0, 1.3]), summarize=st.booleans())
def test_assembled_prompt_never_exceeds_its_total_budget(c, b, stage, calibration, summarize) -> None:
    s = settings(budget=b, calibration=calibration)
    summarizer = (lambda req: "summary " * (req.max_tokens // 2 + 50)) if summarize else None
    prompt = ASSEMBLER.assemble(AssemblyRequest(card=c, stage=stage), s, summarizer)
    recount = total_of(prompt, COUNTER.with_calibration(calibration))
    assert recount <= b.total
    assert prompt.total_tokens <= b.total
    assert recount <= prompt.total_tokens  # the reported figures are an upper bound


def test_order_is_system_agent_history_context_turn() -> None:
    c = card(history=chat(4), notes="THE NOTES",
             context=[item(ContextKind.SOURCE_FILE, "print('x')", "app/x.py")])
    conv = assemble(c, Stage.CODING).conversation
    assert conv.system[0].text.startswith("# Core guardrails")
    assert conv.system[1].text.startswith("# Stage: coding")
    assert [t.role for t in conv.turns] == ["user", "assistant", "user", "assistant", "user"]
    last = conv.turns[-1].text
    assert last.index("THE NOTES") < last.index("app/x.py") < last.index("Continue the coding stage")


def test_history_folding_reports_summarized_rows() -> None:
    msgs = list(chat(200))
    msgs[5] = Message(role="assistant", content="Ran it:\n$ pytest -q\nE   ValueError: bad retry count")
    c = card(history=tuple(msgs))
    p = assemble(c, Stage.CODING, summarizer=lambda req: "What happened so far.")
    assert p.history_mode == "summarized"
    assert {"summarized", "pinned", "verbatim"} <= {r.status for r in p.rows if r.section == "history"}


def test_conversation_starting_with_the_agent_gets_a_user_opener() -> None:
    msgs = (Message(role="assistant", content="I started."), *tool_exchange(1))
    conv = assemble(card(history=msgs)).conversation
    assert conv.turns[0].role == "user"


def test_example_card_explains_every_layer_and_renders_every_format() -> None:
    c = Card.model_validate_json(EXAMPLE_CARD.read_text())
    p = assemble(c, Stage.ERROR_FIXING, summarizer=None)
    sections = {r.section for r in p.rows}
    assert sections == {"system", "agent", "history", "context", "turn"}
    assert p.total_tokens <= p.budget["total"]
    for fmt in ("anthropic", "openai", "gemini", "chatml", "gemma", "human"):
        rendered = p.render(fmt)
        assert rendered
        json.dumps(rendered) if isinstance(rendered, dict) else None
    last = p.conversation.turns[-1].text
    # Error fixing: the failing CI step and the crashing pod come before any source file.
    assert last.index('kind="build_log"') < last.index('kind="pod_log"') < last.index('kind="source_file"')
    assert "##[error]" in last
    assert p.redactions, "the sample card carries secrets that must be redacted"
