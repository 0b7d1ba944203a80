"""A small run of bench/chaos.py: one card through every stage on two workers sharing a
PostgreSQL store, a worker killed by itself right after a model reply was stored, before the
activity could complete (whichever worker stored it: the fault is shared, so it cannot miss when
the other worker took the replies). The retry must act on the stored reply, make no second model
call, and bill every call it made; the histories must replay. (On the code before the ledger the
planning stage acted on "[call 2]" while the store held "[call 1]", and the model saw 6 calls for
5 in the ledger.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.postgres import PG_URL

pytestmark = pytest.mark.timeout(240)
CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"


@pytest.mark.postgres
def test_chaos_smoke_worker_killed_right_after_a_stored_reply(tmp_path: Path, postgres_admin) -> None:
    # Scaled out as a deployment runs: two worker processes on one task queue sharing a PostgreSQL
    # store (a fresh schema, dropped after a run with nothing wrong).
    workdir = tmp_path / "chaos"
    run = subprocess.run([sys.executable, str(CHAOS), "--cards", "1", "--kills", "0", "--store-kills", "1",
                          "--restarts", "0", "--span", "5", "--timeout", "150", "--seed", "7", "--json",
                          "--workdir", str(workdir), "--workers", "2", "--postgres", PG_URL],
                         capture_output=True, text=True, timeout=220)
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["W workers"] == 2 and figures["store"] == "postgresql"
    assert figures["S worker kills right after a stored reply"] == 1, run.stderr[-2000:]
    assert figures["cards finished"] == 1 and figures["cards lost"] == 0
    assert figures["replies compared"] == 5
    assert figures["replies acted on that differ from the stored ones"] == 0, figures["notes"]
    assert figures["model calls made"] == figures["calls in the ledger"] == 5
    assert figures["duplicated messages"] == figures["duplicated usage rows"] == figures["duplicated stage runs"] == 0
    assert figures["histories failing replay"] == 0 and figures["histories replayed"] == 5
    assert run.returncode == 0
    # The run's files are where it was told, not left behind in the system's temporary directory,
    # and a run with nothing wrong leaves no schema behind in the database it was given.
    assert figures["workdir"] == str(workdir) and (workdir / "worker-0.log").is_file()
    schema, said = figures["postgres schema"].split(" ", 1)
    with postgres_admin.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM pg_namespace WHERE nspname = :s"), {"s": schema}).scalar()
    assert said == "(dropped)" and left == 0


def test_a_workdir_that_is_not_an_empty_directory_is_a_usage_error(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    store.write_text("an earlier run's")
    for workdir, said in ((tmp_path, "is not empty"), (store, "is not a directory")):
        run = subprocess.run([sys.executable, str(CHAOS), "--workdir", str(workdir)], capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 2 and said in run.stderr, run.stderr
    assert store.read_text() == "an earlier run's"


def test_a_negative_poller_count_is_a_usage_error() -> None:
    run = subprocess.run([sys.executable, str(CHAOS), "--pollers", "-1"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--pollers must be 0 or more, not -1" in run.stderr


def test_scaled_out_options_refuse_what_cannot_run() -> None:
    for args, said in ((["--workers", "0"], "--workers must be 1 or more, not 0"),
                       (["--postgres", "sqlite:///x.db"], "--postgres must be a postgresql:// URL"),
                       (["--postgres", "not a url"], "--postgres: the store URL is not a database URL"),
                       (["--postgres", "postgresql://nobody@127.0.0.1:1/x"], "--postgres: cannot connect")):
        run = subprocess.run([sys.executable, str(CHAOS), *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and said in run.stderr, run.stderr
