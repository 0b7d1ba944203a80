"""How long `cardloop` commands take to start, against the interpreter doing nothing.

Each command runs as a real process (the installed console script) several times; the median
wall time is printed with its ratio to `python -c pass` measured in the same run. The card
commands run against a headless Temporal dev server started here (no worker: `card move`
signal-with-starts the sample card, `card show` asks for a card the store does not know, so
both connect to Temporal and the store and exit). Target: every command under 0.5 s; the
ratio is what to compare between machines.

Run: .venv/bin/python bench/cli_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cardloop.app.devserver import TemporalDevServer, free_port  # noqa: E402

CLI = Path(sys.executable).parent / "cardloop"
TARGET = 0.5
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "card show --help": ["card", "show", "--help"],
    "prompt list": ["prompt", "list"],
    "prompt path": ["prompt", "path", "guardrails"],
    "prompt validate": ["prompt", "validate", "README.md"],
    "card move": ["card", "move", "examples/card.json", "--to", "planning"],
    "card show": ["card", "show", "acme/github-projects/NOT-THERE"],
}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            TemporalDevServer(port=free_port(), ui_port=None, retention=None) as server:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_")},
               "HOME": tmp, "CARDLOOP_TEMPORAL__ADDRESS": server.address,
               "DATABASE_URL": f"sqlite:///{tmp}/store.sqlite", "CARDLOOP_PATHS__PROMPT_OVERRIDES": f"{tmp}/none"}
        timed([str(CLI), *COMMANDS["card move"]], env)  # the store's first migration is not start-up
        floor = statistics.median(timed([sys.executable, "-c", "pass"], env) for _ in range(args.runs))
        print(f"floor (python -c pass): {floor:.3f} s, median of {args.runs}")
        print(f"{'command':<18} {'seconds':>8} {'ratio':>7}  target < {TARGET} s")
        worst = 0.0
        for name, argv in COMMANDS.items():
            seconds = statistics.median(timed([str(CLI), *argv], env) for _ in range(args.runs))
            worst = max(worst, seconds)
            print(f"{name:<18} {seconds:>8.3f} {seconds / floor:>7.1f}  {'ok' if seconds < TARGET else 'SLOW'}")
        print(f"worst_seconds {worst:.3f}  worst_ratio {worst / floor:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
