"""cardloop/app/malloc.py: freed large blocks go back to the system, so a worker that reads many
logs levels off. Measured in fresh processes (glibc's malloc state is per process)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from cardloop.app.malloc import return_large_blocks

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                           reason="the threshold is glibc's")

# Logs of ~8 MB made and dropped while the process keeps 12 MB of smaller texts: the RSS growth
# beyond what is kept is what the heap holds on to after the logs are gone.
_PROBE = """
import sys
from cardloop.app.malloc import return_large_blocks
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6
if sys.argv[1] == "fixed":
    assert return_large_blocks()
base = rss()
kept = []
for i in range(40):
    log = "x" * (8_000_000 + i)
    kept.append("y" * 300_000)
    del log
print(rss() - base - 12.0)
"""


def _retained_mb(mode: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=env,
                         timeout=60, check=True)
    return float(out.stdout.strip())


@glibc
def test_a_freed_log_goes_back_to_the_system_once_the_threshold_is_fixed() -> None:
    assert _retained_mb("dynamic") >= 6  # glibc's default keeps the last log's space in the heap
    assert _retained_mb("fixed") < 2


@glibc
def test_setting_it_twice_is_harmless() -> None:
    assert return_large_blocks() and return_large_blocks()


def test_an_operator_setting_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")  # glibc read it at start: left alone
    assert return_large_blocks()
