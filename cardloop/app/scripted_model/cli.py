"""`python -m cardloop.app.scripted_model`: serve a transcript on loopback for a demo by hand."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from cardloop.app.scripted_model.model import ScriptedModel
from cardloop.app.scripted_model.transcript import TranscriptError, load_transcript


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cardloop.app.scripted_model",
        description="Serve a scripted Anthropic Messages API on 127.0.0.1 (a test double for demos).",
    )
    parser.add_argument("transcript", nargs="?", help="transcript JSON: {stage: [reply, ...]}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every answer")
    args = parser.parse_args(argv)
    try:
        transcript = load_transcript(args.transcript) if args.transcript else {}
    except TranscriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    model = ScriptedModel(transcript, host=args.host, port=args.port, latency=args.latency)
    try:
        model.start()
    except OSError as exc:  # the port is taken, or the host is not this machine's
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    with model:
        print(f"ScriptedModel listening on {model.url} (ANTHROPIC_BASE_URL={model.url}); Ctrl-C stops it",
              flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0
