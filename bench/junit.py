"""Reading a huge JUnit report from an artifact's zip: parse_junit's stream against the
ElementTree parse the source used before (the whole member read, then ET.fromstring), measured in
the same run, each in a fresh process so its peak memory is its own:

    seconds      to find the failed tests of a report of --mb MB (passing tests, 6 failures)
    rss_mb       growth of the process's peak resident memory while doing it
    traced_mb    the peak of Python's allocations while doing it (tracemalloc, a second run)
    ratio        stream / tree, seconds and traced memory              target: both < 1

Run: .venv/bin/python bench/junit.py [--mb 50]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASE = (b'<testcase classname="tests.test_big.TestMany" name="test_case_%d" file="tests/test_big.py" line="10" '
        b'time="0.001"><system-out>some captured output line that is long enough to matter</system-out></testcase>\n')
FAIL = (b'<testcase classname="tests.test_big" name="test_bad_%d" time="0.1"><failure message="assert 1 == 2">'
        + b"E   assert 1 == 2\n" * 200 + b"tests/test_big.py:12: AssertionError</failure></testcase>\n")


def report_zip(mb: int) -> bytes:
    parts = [b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="big">\n']
    size = n = 0
    while size < mb * 1024 * 1024:
        parts.append(FAIL % n if n % 50_000 == 7 else CASE % n)
        size += len(parts[-1])
        n += 1
    parts.append(b"</testsuite></testsuites>\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("reports/junit.xml", b"".join(parts))
    return buf.getvalue()


def child(mode: str, path: str) -> None:
    import xml.etree.ElementTree as ET

    from cardloop.integrations.sources.junit import JUnitReport, parse_junit

    # The zip (under 1 MB) is made by the parent: the 50 MB it inflates to never was in this
    # process before the measurement, so the peak's growth is the reader's own.
    archive = zipfile.ZipFile(io.BytesIO(Path(path).read_bytes()))
    info = archive.infolist()[0]
    def run() -> int:
        if mode == "tree":
            root = ET.fromstring(archive.read(info))
            return sum(1 for c in root.iter("testcase") if c.find("failure") is not None)
        report = JUnitReport()
        parse_junit(lambda: archive.open(info), report)
        return report.failed_count

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    failed = run()
    seconds = time.perf_counter() - start
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    # The peak RSS hides what fits in memory freed earlier (imports): Python's own count too.
    tracemalloc.start()
    run()
    traced = tracemalloc.get_traced_memory()[1] / 1024 / 1024
    print(json.dumps({"seconds": seconds, "rss_mb": rss, "traced_mb": traced, "failed": failed}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--child", choices=("tree", "stream"))
    parser.add_argument("--zip")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.zip)
        return
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "artifact.zip"
        path.write_bytes(report_zip(args.mb))
        for mode in ("tree", "stream"):
            out = subprocess.run([sys.executable, __file__, "--child", mode, "--zip", str(path)],
                                 check=True, capture_output=True, text=True).stdout
            got[mode] = json.loads(out)
            print(f"{mode:6}  seconds {got[mode]['seconds']:.2f}  rss_mb {got[mode]['rss_mb']:.0f}  "
                  f"traced_mb {got[mode]['traced_mb']:.0f}  "
                  f"failed {got[mode]['failed']}")
    tree, stream = got["tree"], got["stream"]
    print(f"ratio   seconds {stream['seconds'] / tree['seconds']:.2f}  "
          f"traced_mb {stream['traced_mb'] / tree['traced_mb']:.2f}")


if __name__ == "__main__":
    main()
