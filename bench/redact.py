"""Secret redaction on adversarial inputs: seconds per MB for our redactor and for a floor
measured in the same run (the bare `re` engine making one simple pass over the same text).

    .venv/bin/python bench/redact.py            # 100 KB and 1 MB per family
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cardloop.prompts.redact import DEFAULT_REDACTOR

FLOOR = re.compile(r"[A-Za-z0-9]{40}")
LOG = (Path(__file__).resolve().parent.parent / "tests" / "prompts" / "fixtures" / "logs" / "gha_pytest_failure.log")


def families(size: int) -> dict[str, str]:
    realistic = LOG.read_text(encoding="utf-8") + "\nexport GITHUB_TOKEN=ghp_" + "a1B2c3D4" * 5 + "\n"
    return {
        "key*": "key" * (size // 3),
        "İ+a*": "İ" + "a" * size,
        "token_*": "token_" * (size // 6),
        "password= *": "password= " * (size // 10),
        "base64 run": "QUJD" * (size // 4),
        "long line, credential words": ("api_key secret token " * (size // 21)),
        "PEM without END": "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIE" * (size // 4),
        "unterminated quotes": 'password="' * (size // 10),
        "CI log with secrets": (realistic * (size // len(realistic) + 1))[:size],
    }


def seconds(fn, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    worst = 0.0
    print(f"{'input':32} {'size':>8} {'ours s/MB':>10} {'floor s/MB':>11} {'ratio':>8}")
    for size in (100_000, 1_000_000):
        for name, text in families(size).items():
            mb = len(text.encode("utf-8")) / 1e6
            ours = seconds(DEFAULT_REDACTOR.redact, text) / mb
            floor = seconds(lambda t: FLOOR.sub("", t), text) / mb
            worst = max(worst, ours)
            print(f"{name:32} {size:>8,} {ours:>10.4f} {floor:>11.4f} {ours / floor:>8.1f}")
    print(f"worst case: {worst:.3f} s/MB")


if __name__ == "__main__":
    main()
