"""Tenant prompt validation against public injection corpora, layer by layer.

    .venv/bin/python -m bench.injection [--cache DIR] [--misses]

Prints, on the held-out sides of bench/injection_corpus.py's split (never trained on):
recall on attacks and false rejects on benign prompts for each offline layer: the patterns
(validate.py's phrase list alone), the classifier (prompts/injection, alone), and combined
(what `validate_tenant_prompt` does: rejected when either rejects). The guard model is a third,
online layer and is not measured here (it needs a model). Also the classifier's cost per
prompt, next to the pattern layer's as the floor measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.injection_corpus import DEFAULT_CACHE, Sample, load, split
from cardloop.prompts.injection.classifier import default_classifier
from cardloop.prompts.validate import ValidationStatus, validate_tenant_prompt

Layer = Callable[[str], bool]


def _patterns(text: str) -> bool:
    return validate_tenant_prompt(text, classifier=False).status is ValidationStatus.REJECTED


def _classifier(text: str) -> bool:
    return default_classifier().classify(text).attack


def _combined(text: str) -> bool:
    return validate_tenant_prompt(text).status is ValidationStatus.REJECTED


LAYERS: dict[str, Layer] = {"patterns": _patterns, "classifier": _classifier, "combined": _combined}


def figures(layer: Layer, samples: list[Sample]) -> tuple[int, int, int, int, Counter[str]]:
    caught = rejected = 0
    missed: Counter[str] = Counter()
    attacks = [s for s in samples if s.attack]
    benign = [s for s in samples if not s.attack]
    for s in attacks:
        if layer(s.text):
            caught += 1
        else:
            missed[s.category] += 1
    for s in benign:
        rejected += layer(s.text)
    return caught, len(attacks), rejected, len(benign), missed


def _per_prompt_ms(layer: Layer, samples: list[Sample]) -> tuple[float, float]:
    times = []
    for s in samples:
        t = time.perf_counter()
        layer(s.text)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--misses", action="store_true", help="list each missed attack and false reject")
    args = ap.parse_args()
    _, validation, test = split(load(args.cache))
    default_classifier()  # loaded once, outside the timings
    sides = {"test (bastioncorpus 0.6.0, the issue's corpus, held out whole)": test,
             "validation (held-out families of the other corpora)": validation}
    for title, side in sides.items():
        print(f"\n{title}: {sum(s.attack for s in side)} attacks, {sum(not s.attack for s in side)} benign, "
              f"{len({s.lang for s in side})} languages")
        print(f"  {'layer':<11} {'recall':>14} {'false rejects':>16}")
        for name, layer in LAYERS.items():
            caught, attacks, rejected, benign, missed = figures(layer, side)
            print(f"  {name:<11} {caught:>4}/{attacks:<4} {caught / attacks:5.3f} "
                  f"{rejected:>4}/{benign:<4} {rejected / benign:5.3f}")
            if name == "combined" and missed:
                print("    combined misses by category: " + ", ".join(f"{k} {v}" for k, v in missed.most_common()))
            if args.misses and name == "combined":
                for s in side:
                    if s.attack != layer(s.text):
                        kind = "MISSED" if s.attack else "FALSE REJECT"
                        print(f"    {kind} [{s.category}/{s.lang}] {s.text[:110]!r}")
    every = test + validation
    print(f"\nper prompt over {len(every)} held-out prompts (median / p95 ms; mean length "
          f"{statistics.mean(len(s.text) for s in every):,.0f} chars, longest {max(len(s.text) for s in every):,}):")
    for name, layer in LAYERS.items():
        med, p95 = _per_prompt_ms(layer, every)
        print(f"  {name:<11} {med:6.2f} / {p95:6.2f}")


if __name__ == "__main__":
    main()
