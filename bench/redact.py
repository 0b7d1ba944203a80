"""Secret redaction on adversarial inputs, against the bare `re` engine in the same run.

For each input family at 100 KB, 1 MB and (when the 1 MB run took under two seconds) 4 MB,
prints seconds per MB of UTF-8 for `DEFAULT_REDACTOR.redact` and for a floor measured on the
same text in the same run (one `re.sub(r"[A-Za-z0-9]{40}", "", text)` pass), their ratio, and
the redactor's work per input character (`ScanStats.total`, machine independent). Linear means
the same s/MB and the same work per character at every size; the old quadratic redactor took
115 s for 1 MB of "key"*N and ~11 s for 100 KB of "?token="*N.

    worst_ratio            the largest ours/floor over all rows
    worst_seconds_per_mb   the slowest family
    worst_growth           the largest (s/MB at the largest size) / (s/MB at 100 KB)

Run: .venv/bin/python bench/redact.py [--runs N]     (about a minute)
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cardloop.prompts.redact import DEFAULT_REDACTOR, ScanStats

FLOOR = re.compile(r"[A-Za-z0-9]{40}")
LOG = Path(__file__).resolve().parent.parent / "tests" / "prompts" / "fixtures" / "logs" / "gha_pytest_failure.log"
SIZES = (100_000, 1_000_000, 4_000_000)
FOUR_MB_IF_1MB_UNDER = 2.0  # seconds (then one run of 4 MB)


def cycle(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def ci_log(size: int) -> str:
    """The bundled GitHub Actions log, repeated, with a token, a URL password and a key."""
    log = LOG.read_text(encoding="utf-8")
    secrets = ("\nexport GITHUB_TOKEN=ghp_" + "a1B2c3D4" * 5 + "\n"
               "retry POST https://deploy:Zq8Zq8Zq8Zq8xY@ci.acme.dev/hook\n"
               "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    return cycle(log + secrets, size)


def nested(line: str, size: int) -> str:
    """`line` indented one space more on each line, `size` characters in all."""
    parts: list[str] = []
    total = indent = 0
    while total < size:
        parts.append(" " * indent + line)
        total += indent + len(line)
        indent += 1
    return "".join(parts)[:size]


FAMILIES: dict[str, Callable[[int], str]] = {
    "key*N": lambda n: cycle("key", n),
    "İ + a*N": lambda n: "İ" + "a" * (n - 1),
    "token_*N": lambda n: cycle("token_", n),
    "?token=*N (query values)": lambda n: cycle("?token=", n),
    "token=*N (one long value)": lambda n: cycle("token=", n),
    "base64 run": lambda n: cycle("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkrLw==", n),
    "hex run": lambda n: cycle("0123456789abcdef", n),
    "long line, credential words": lambda n: cycle("api_key secret token password bearer ", n),
    "long line, no credential words": lambda n: cycle("lorem ipsum dolor sit amet consectetur ", n),
    "password= without values (lines)": lambda n: cycle("password=\n", n),
    "password= without values (spaces)": lambda n: cycle("password= ", n),
    "PEM BEGIN without END": lambda n: "-----BEGIN RSA PRIVATE KEY-----\n" + cycle("MIIEowIBAAKCAQEA3Tz2\n", n),
    "unterminated quotes": lambda n: cycle('password="', n),
    "lone surrogates": lambda n: cycle("hi \ud800 token=", n),
    "dense real secrets": lambda n: cycle("token=a1B2c3D4e5 ", n),
    "dense rejected (secret_name=x)": lambda n: cycle("secret_name=x", n),
    "dense rejected (?token=%s)": lambda n: cycle("?token=%s", n),
    "dense rejected (pwdx=, worst known)": lambda n: cycle("pwdx=", n),
    "CI log with secrets (realistic)": ci_log,
    # Values over several lines: YAML blocks, nested ever deeper, and a Secret's stringData.
    "password: | blocks (lines)": lambda n: cycle("password: |\n  a1B2c3D4e5\n", n),
    "password: | nested deeper": lambda n: nested("password: |\n", n),
    "token=a\\ continuations": lambda n: cycle("token=a1B2c3D4e5\\\n", n),
    "kind: Secret + stringData:*N": lambda n: "kind: Secret\n" + cycle("stringData:\n  k: v1B2c3D4\n", n),
    "kind: Secret + stringData nested": lambda n: "kind: Secret\n" + nested("stringData:\n", n),
    '"kind":"Secret" + "stringData":{*N': lambda n: '"kind":"Secret",' + cycle('"stringData":{"k":"', n),
    "name/value pairs left open": lambda n: cycle("- name: db_token\n  value: '", n),
    "SQL password quotes": lambda n: cycle("password 'identified by '", n),
    "quoted backslashes": lambda n: 'token="' + cycle("\\a", n),
    # Placeholder defaults, YAML anchors and tags, TOML multi-line strings, .properties lines
    # and HTML password inputs, each left open or repeated.
    "${DB_PASSWORD:- nested open": lambda n: cycle("${DB_PASSWORD:-${", n),
    "password: &a !b props": lambda n: cycle("password: &a !b &c !d ", n),
    'password = """ left open': lambda n: cycle('password = """a token = \'\'\'b ', n),
    "db.password lines": lambda n: cycle("db.password s3cr3tV4lue9\n", n),
    "<input type=password value= open": lambda n: cycle('<input type="password" value="', n),
    # Bare `*_KEY` keys, CSV tables and key,value lines, translation tables, Sentry DSNs and git's
    # password prompt, each dense or left open.
    "sort_key=... (bare *_KEY, rejected)": lambda n: cycle("sort_key=created_at ", n),
    "csv header + rows": lambda n: cycle("username,password\nbob,Xk9pQ7vR2mT4\n", n),
    "csv one line of key,": lambda n: cycle("api_key,", n),
    "csv headers without rows": lambda n: cycle("id,token\n\n", n),
    "locale table entries": lambda n: cycle('"password": "Passwort", "t": "Jetzt anmelden", ', n),
    "sentry DSN keys open": lambda n: cycle("dsn https://" + "0f" * 16 + "@", n),
    "Password for ' prompts": lambda n: cycle("Password for 'x': ", n),
}


def best(fn: Callable[[str], object], text: str, runs: int) -> float:
    elapsed = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(text)
        elapsed = min(elapsed, time.perf_counter() - t0)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="best of N runs per measurement")
    args = parser.parse_args()
    worst_ratio = worst_spm = worst_growth = 0.0
    worst_ratio_at = worst_spm_at = worst_growth_at = ""
    print(f"{'input':36} {'size':>9} {'ours s/MB':>10} {'floor s/MB':>11} {'ratio':>7} {'work/char':>10}")
    for name, make in FAMILIES.items():
        first_spm = last_spm = last_seconds = 0.0
        for size in SIZES:
            if size == SIZES[-1] and last_seconds >= FOUR_MB_IF_1MB_UNDER:
                print(f"{name:36} {size:>9,} {'skipped: 1 MB took ' + f'{last_seconds:.2f} s':>41}")
                continue
            text = make(size)
            mb = len(text.encode("utf-8", "surrogatepass")) / 1e6
            runs = args.runs if size <= 1_000_000 else 1
            ours = best(DEFAULT_REDACTOR.redact, text, runs)
            floor = best(lambda t: FLOOR.sub("", t), text, runs)
            stats = ScanStats()
            DEFAULT_REDACTOR.find(text, stats)
            spm, ratio = ours / mb, ours / floor
            print(f"{name:36} {size:>9,} {spm:>10.4f} {floor / mb:>11.4f} {ratio:>7.1f} "
                  f"{stats.total / len(text):>10.2f}", flush=True)
            last_seconds, last_spm = ours, spm
            first_spm = first_spm or spm
            if ratio > worst_ratio:
                worst_ratio, worst_ratio_at = ratio, f"{name} at {size:,}"
            if spm > worst_spm:
                worst_spm, worst_spm_at = spm, f"{name} at {size:,}"
        growth = last_spm / first_spm
        if growth > worst_growth:
            worst_growth, worst_growth_at = growth, name
    print(f"worst_ratio: {worst_ratio:.1f}  ({worst_ratio_at})")
    print(f"worst_seconds_per_mb: {worst_spm:.3f}  ({worst_spm_at})")
    print(f"worst_growth: {worst_growth:.2f}  ({worst_growth_at}; 1.0 is linear, a quadratic "
          "redactor grows 10x from 100 KB to 1 MB)")


if __name__ == "__main__":
    main()
