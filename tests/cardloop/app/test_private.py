"""Local state is readable by its owner only: the data directory 0700, the store's and Temporal's
SQLite files 0600, whatever the umask (a shared host must not read every card and prompt)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cardloop.app.devserver import TemporalDevServer, free_port
from cardloop.app.stack import data_dir, open_store
from cardloop.contracts.config import REPO_CONFIG, load_config


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def lax_umask() -> None:
    old = os.umask(0o022)  # what made 644 files in a 755 directory
    yield
    os.umask(old)


def test_the_data_dir_and_the_store_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = load_config(REPO_CONFIG, env={"CARDLOOP_DEV__DATA_DIR": str(data),
                                           "CARDLOOP_STORE__URL": f"sqlite:///{data / 'cardloop.sqlite'}"})
    assert mode(data_dir(config)) == 0o700
    store = open_store(config)
    try:
        assert mode(data / "cardloop.sqlite") == 0o600
        assert not (data / "cardloop.sqlite-wal").exists() or mode(data / "cardloop.sqlite-wal") == 0o600
    finally:
        store.close()


def test_an_existing_open_data_dir_is_closed_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    config = load_config(REPO_CONFIG, env={"CARDLOOP_DEV__DATA_DIR": str(data)})
    assert mode(data_dir(config)) == 0o700


def test_temporals_sqlite_file_is_private(tmp_path: Path) -> None:
    db = tmp_path / "dev" / "temporal.sqlite"
    with TemporalDevServer(port=free_port(), ui_port=None, db_file=db, retention=None,
                           log_file=tmp_path / "temporal.log"):
        assert mode(db.parent) == 0o700 and mode(db) == 0o600


def test_a_private_process_environment_is_unreadable_by_the_same_user(tmp_path: Path) -> None:
    # The agent's commands run as the worker's user: without this, a command read the worker's
    # API keys from /proc/<pid>/environ. Both sides run as an unprivileged user (root reads any
    # process's environment whatever it asks for), the same one, as a worker and its commands do.
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        pytest.skip("needs setpriv and root to run both sides as one unprivileged user")
    as_nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable, "-c"]
    if subprocess.run([*as_nobody, "import cardloop.app.private"], cwd=tmp_path, capture_output=True).returncode:
        pytest.skip("the unprivileged user cannot read this checkout")
    read = ("import sys\ntry:\n    open(f'/proc/{sys.argv[1]}/environ', 'rb').read()\n    print('read')\n"
            "except PermissionError:\n    print('refused')")
    for private, expected in ((True, "refused"), (False, "read")):  # the second: the check is not vacuous
        code = ("import time; from cardloop.app.private import private_process; "
                f"print({private} and private_process(), flush=True); time.sleep(30)")
        child = subprocess.Popen([*as_nobody, code], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                                 env={**os.environ, "CARDLOOP_TEST_SECRET": "sk-ant-should-not-be-read"})
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == str(private)
            reader = subprocess.run([*as_nobody, read, str(child.pid)], capture_output=True, text=True, timeout=30)
            assert reader.stdout.strip() == expected, (private, reader.stdout, reader.stderr)
        finally:
            child.kill()
            child.wait()
