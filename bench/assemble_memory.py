"""A worker's memory as it assembles prompts for many cards: it must level off.

Each card has the bundled sample's 200-message history (made distinct per card) and a build log
of about 700 KB; one assembler serves them all, as a worker's does. Prints the process's resident
memory (RSS) after the first card and then every `--every` cards, with what each cache holds: the
render, redaction and excerpt caches (bounded by characters) and the token-count cache (bounded
by entries). `late_growth_mb_per_100_cards` is the RSS growth, per 100 cards, from the first mark at
which every cache had reached its bound (it has pushed out an entry) to the last card (target
<= 2: once the caches are full the process stops growing). Until then growth is the caches
filling, which their bounds cap; the excerpt cache fills over the first ~450 such cards, so a
run too short for a window of at least 2 marks after that says so and exits 1. It runs with
glibc's mmap threshold fixed, as the worker does (cardloop/app/malloc.py); `--glibc-default`
leaves it dynamic, where freed logs fragment the heap and the process grew 2.5 to 3 MB per 100
cards with every cache full.
Before the caches were bounded by characters, 375 such cards reached 545 MB and still grew by
about 1.4 MB a card (140 per 100 cards).

Run: .venv/bin/python bench/assemble_memory.py [--cards 800] [--every 100] [--glibc-default]
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

from cardloop.app.malloc import return_large_blocks
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
    parser.add_argument("--glibc-default", action="store_true",
                        help="leave glibc's dynamic mmap threshold as it is (what the worker changes)")
    args = parser.parse_args()
    if not args.glibc_default:
        return_large_blocks()  # as `cardloop worker` does (cardloop/app/malloc.py)
    base = build_card()
    settings = AssemblySettings(budget=BUDGET, calibration=1.0)
    assembler = PromptAssembler(TemplateStore(), TokenCounter())
    rng = random.Random(1)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    marks: dict[int, float] = {}
    full_at: int | None = None  # the first mark at which every cache had reached its bound
    for i in range(args.cards):
        history = tuple(m.model_copy(update={"content": f"card {i}: {m.content}"}) for m in base.history)
        log = "\n".join(f"{i} line {j} " + " ".join(rng.choices(words, k=12)) for j in range(8000))
        context = (*base.context, ContextItem(kind=ContextKind.BUILD_LOG, source=f"ci/{i}", content=log))
        card = base.model_copy(update={"id": f"mem-{i}", "history": history, "context": context})
        assembler.assemble(AssemblyRequest(card=card, stage=Stage.ERROR_FIXING), settings)
        n = i + 1
        if n == 1 or n % args.every == 0 or n == args.cards:
            marks[n] = rss_mb()
            caches = {"render": assembler._messages, "redaction": assembler.scrubber, "excerpt": assembler._excerpts}
            full = all(c.evictions for c in caches.values()) and assembler.counter.stats.evictions > 0
            if full and full_at is None:
                full_at = n
            print(f"cards: {n:5d}  rss_mb: {marks[n]:7.1f}  render_cache_chars: {assembler._messages.chars:,}  "
                  f"redaction_cache_chars: {assembler.scrubber.chars:,}  "
                  f"excerpt_cache_chars: {assembler._excerpts.chars:,}  "
                  f"token_cache_entries: {assembler.counter.entries:,}{'  (all caches full)' if full else ''}",
                  flush=True)
    print(f"first_card_rss_mb: {marks[1]:.1f}  last_rss_mb: {marks[args.cards]:.1f}")
    after = [k for k in marks if full_at is not None and k >= full_at]
    if len(after) < 2:
        print(f"late_growth_mb_per_100_cards: not measured: the caches were still filling at card {args.cards} "
              f"(run with more --cards)")
        sys.exit(1)
    growth = (marks[args.cards] - marks[full_at]) / (args.cards - full_at) * 100
    print(f"late_growth_mb_per_100_cards: {growth:.2f} (cards {full_at} to {args.cards}, every cache full; "
          f"target <= 2)")
    sys.exit(0 if growth <= 2 else 1)


if __name__ == "__main__":
    main()
