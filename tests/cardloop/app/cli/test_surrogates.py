"""Text that is not UTF-8 on the command line: undecodable argument bytes (which Python turns
into lone surrogates), files that are not UTF-8, and card files with an unpaired "\\ud800"
escape. Each is exit 2 with a message naming it; nothing is stored and nothing crashes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLI = Path(sys.executable).parent / "cardloop"


def run(tmp_path: Path, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite'}", "HOME": str(tmp_path),
           # No Temporal runs here: a command that got as far as connecting would fail differently.
           "CARDLOOP_TEMPORAL__ADDRESS": '"127.0.0.1:9"'}
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, errors="replace", cwd=ROOT, env=env,
                          timeout=60)


def assert_refused(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr


@pytest.mark.parametrize("args", [
    (b"tenant", b"set-prompt", b"acme", b"PROMPT", b"--tone", b"\xff=formal"),
    (b"tenant", b"set-prompt", b"acme", b"PROMPT", b"--language", b"Deutsch\xed\xa0\x80"),
    (b"tenant", b"token-create", b"acme", b"ci\xff"),
    (b"card", b"say", b"acme/github/PAY-1", b"hi \xff"),
    (b"card", b"say", b"acme/github/PAY-1", b"hi", b"--author", b"\xfe"),
])
def test_undecodable_arguments_are_refused_before_anything_runs(tmp_path: Path, args: tuple[bytes, ...]) -> None:
    (tmp_path / "PROMPT").write_text("Be brief.")
    args = tuple(str(tmp_path / "PROMPT").encode() if a == b"PROMPT" else a for a in args)
    out = run(tmp_path, *args)
    assert_refused(out, "is not UTF-8 text", "lone surrogate U+DC")
    assert run(tmp_path, "tenant", "versions", "acme").stdout.strip() == "tenant acme has no prompt versions"


def test_a_prompt_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Réponds en français.".encode("latin-1"))
    assert_refused(run(tmp_path, "tenant", "set-prompt", "acme", str(bad)), "codec can't decode")
    assert_refused(run(tmp_path, "prompt", "validate", str(bad)), "codec can't decode")
    assert run(tmp_path, "tenant", "versions", "acme").stdout.strip() == "tenant acme has no prompt versions"


def test_a_card_file_with_an_unpaired_escape_is_refused_naming_the_field(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text('{"id": "PAY-1", "tenant": "acme", "title": "t", '
                    '"history": [{"role": "user", "content": "hi \\ud800"}]}')
    for args in (("card", "check", str(card)), ("card", "move", str(card), "--to", "planning"),
                 ("prompt", "explain", "--card", str(card), "--stage", "coding")):
        assert_refused(run(tmp_path, *args), "history.0.content: lone surrogate U+D800")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"id": "PAY-1", "title": "caf\xe9"}')
    assert_refused(run(tmp_path, "card", "move", str(latin), "--to", "planning"), "codec can't decode")
