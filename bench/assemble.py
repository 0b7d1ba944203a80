"""Prompt assembly speed against one tokenizer pass over the final prompt text.

Builds a ~40,000-token prompt from a 200-message history plus context (seeded from the
bundled sample card) and prints, as medians of several runs, each against the time of one
`encode_ordinary` of the final prompt text measured in the same run:

    cold_ratio      a fresh assembler (empty caches) assembling the prompt    target <= 1.2
    warm_ratio      re-assembling after one new message, caches warm          target <= 0.1
    cache_hit_rate  token-count cache hits during the warm assembly            target >= 0.96

and two floors measured in the same run, each against the baseline encode. What no cold
assembly can skip: every character sent is read for secrets and every token sent counted, once:

    floor_ratio        (one redaction pass over the prompt text + the baseline encode) / the encode
    input_floor_ratio  the same with the redaction pass over all of the card's input instead (every
                       message and context item: pinned facts come from the messages the fold drops)
    cold_vs_floor      cold assembly / the first floor

Run: .venv/bin/python bench/assemble.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
from cardloop.prompts.card import Card, Message
from cardloop.prompts.redact import DEFAULT_REDACTOR
from cardloop.prompts.settings import AssemblySettings, TokenBudget
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter, load_encoding

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "card.json"
BUDGET = TokenBudget(system=1_000, agent=1_500, history=22_000, context=16_000, total=42_000)


def build_card() -> Card:
    """200 distinct messages cycled from the sample's history, and its context items."""
    sample = Card.model_validate_json(SAMPLE.read_text())
    plain = [m for m in sample.history if not m.tool_calls and m.role != "tool"]
    history = []
    for i in range(200):
        src = plain[i % len(plain)]
        role = "user" if i % 2 == 0 else "assistant"
        history.append(Message(role=role, id=f"b{i}", author=src.author if role == "user" else None,
                               created_at=src.created_at + timedelta(days=i // len(plain)) if src.created_at else None,
                               content=f"[{i}] {src.content}"))
    return sample.model_copy(update={"history": tuple(history)})


def prompt_text(prompt) -> str:
    conv = prompt.conversation
    return "\n\n".join([*(b.text for b in conv.system), *(t.text for t in conv.turns)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    card = build_card()
    settings = AssemblySettings(budget=BUDGET, calibration=1.0)
    request = AssemblyRequest(card=card, stage=Stage.ERROR_FIXING)
    new_message = Message(role="user", author="dana", content="One more thing: log the attempt number.")
    grown = AssemblyRequest(card=card.model_copy(update={"history": (*card.history, new_message)}),
                            stage=Stage.ERROR_FIXING)
    grown_json = grown.card.model_dump_json()
    encoding = load_encoding("cl100k_base")
    templates = TemplateStore()
    baselines, colds, warms, hit_rates, redactions = [], [], [], [], []
    input_text = "\n".join([card.title, card.body, *(m.content for m in card.history),
                            *(item.content for item in card.context)])
    for _ in range(args.runs):
        assembler = PromptAssembler(templates, TokenCounter())
        t0 = time.perf_counter()
        prompt = assembler.assemble(request, settings)
        colds.append(time.perf_counter() - t0)

        # A new card object, as an activity call would deserialize it (not timed).
        fresh = AssemblyRequest(card=Card.model_validate_json(grown_json), stage=grown.stage)
        assembler.counter.reset_stats()
        t0 = time.perf_counter()
        assembler.assemble(fresh, settings)
        warms.append(time.perf_counter() - t0)
        hit_rates.append(assembler.counter.stats.hit_rate)

        text = prompt_text(prompt)
        t0 = time.perf_counter()
        tokens = len(encoding.encode_ordinary(text))
        baselines.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        DEFAULT_REDACTOR.redact(text)
        t1 = time.perf_counter()
        DEFAULT_REDACTOR.redact(input_text)
        redactions.append((t1 - t0, time.perf_counter() - t1))
    base = statistics.median(baselines)
    print(f"prompt_tokens: {tokens}")
    print(f"history_messages: {len(card.history)}  history_mode: {prompt.history_mode}")
    print(f"baseline_encode_seconds: {base:.4f}")
    print(f"cold_seconds: {statistics.median(colds):.4f}")
    print(f"warm_seconds: {statistics.median(warms):.4f}")
    print(f"cold_ratio: {statistics.median(colds) / base:.3f}")
    print(f"warm_ratio: {statistics.median(warms) / base:.3f}")
    print(f"cache_hit_rate: {statistics.median(hit_rates):.3f}")
    redact_prompt = statistics.median(r[0] for r in redactions)
    redact_input = statistics.median(r[1] for r in redactions)
    print(f"prompt_chars: {len(text)}  input_chars: {len(input_text)}")
    print(f"redact_prompt_seconds: {redact_prompt:.4f}  redact_input_seconds: {redact_input:.4f}")
    print(f"floor_ratio: {(base + redact_prompt) / base:.3f}")
    print(f"input_floor_ratio: {(base + redact_input) / base:.3f}")
    print(f"cold_vs_floor: {statistics.median(colds) / (base + redact_prompt):.3f}")


if __name__ == "__main__":
    main()
