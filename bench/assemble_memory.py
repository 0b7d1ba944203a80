"""A worker's memory as it assembles prompts for many cards: it must level off.

Each card has the bundled sample's 200-message history (made distinct per card) and a build log
of about 700 KB; one assembler serves them all, as a worker's does. Prints the process's resident
memory (RSS) after the first card and then every `--every` cards, the characters the render and
redaction caches hold, and `late_growth_mb_per_100_cards`: RSS growth over the last half of the
cards, per 100 cards (target <= 2: the caches have reached their bounds and the process stops
growing; the token-count cache, bounded by entries, fills over the first ~500 such cards).
Before the caches were bounded by characters, 375 such cards reached 545 MB and still grew by
about 1.4 MB a card (140 per 100 cards).

Run: .venv/bin/python bench/assemble_memory.py [--cards 800] [--every 100]
"""

from __future__ import annotations

import argparse
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from assemble import BUDGET, build_card

from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.settings import AssemblySettings
from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import TemplateStore
from cardloop.prompts.tokens import TokenCounter


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cards", type=int, default=800)
    parser.add_argument("--every", type=int, default=100)
    args = parser.parse_args()
    base = build_card()
    settings = AssemblySettings(budget=BUDGET, calibration=1.0)
    assembler = PromptAssembler(TemplateStore(), TokenCounter())
    rng = random.Random(1)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    marks: dict[int, float] = {}
    for i in range(args.cards):
        history = tuple(m.model_copy(update={"content": f"card {i}: {m.content}"}) for m in base.history)
        log = "\n".join(f"{i} line {j} " + " ".join(rng.choices(words, k=12)) for j in range(8000))
        context = (*base.context, ContextItem(kind=ContextKind.BUILD_LOG, source=f"ci/{i}", content=log))
        card = base.model_copy(update={"id": f"mem-{i}", "history": history, "context": context})
        assembler.assemble(AssemblyRequest(card=card, stage=Stage.ERROR_FIXING), settings)
        n = i + 1
        if n == 1 or n % args.every == 0 or n == args.cards:
            marks[n] = rss_mb()
            print(f"cards: {n:5d}  rss_mb: {marks[n]:7.1f}  render_cache_chars: {assembler._messages.chars:,}  "
                  f"redaction_cache_chars: {assembler.scrubber.chars:,}", flush=True)
    half = min(marks, key=lambda k: abs(k - args.cards / 2))
    growth = (marks[args.cards] - marks[half]) / max(1, args.cards - half) * 100
    print(f"first_card_rss_mb: {marks[1]:.1f}  last_rss_mb: {marks[args.cards]:.1f}")
    print(f"late_growth_mb_per_100_cards: {growth:.2f} (cards {half} to {args.cards}; target <= 2)")
    sys.exit(0 if growth <= 2 else 1)


if __name__ == "__main__":
    main()
