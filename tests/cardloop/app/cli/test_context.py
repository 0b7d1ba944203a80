"""`cardloop context CARD --stage STAGE` on a card file, with a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

CLI = Path(sys.executable).parent / "cardloop"


def test_context_shows_each_source_its_tokens_and_what_the_budget_kept(tmp_path: Path,
                                                                      repository_env: dict[str, str]) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"id": "CTX-2", "title": "Cap the retry delay", "repo": "acme/payments-api",
                                "branch": "card/PAY-1", "body": "See app/webhooks/retry.py"}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CARDLOOP_GITHUB")},
           "HOME": str(tmp_path), **repository_env}
    out = subprocess.run([str(CLI), "context", str(card), "--stage", "error_fixing", "--source", "repository",
                          "--source", "github_actions"], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "[ok] repository" in out.stdout
    assert "app/webhooks/retry.py" in out.stdout
    assert "[unavailable] github_actions: no GitHub credentials" in out.stdout
    assert "what the context budget kept" in out.stdout
    data = json.loads(subprocess.run([str(CLI), "context", str(card), "--stage", "planning", "--json"],
                                     capture_output=True, text=True, cwd=ROOT, env=env, timeout=120).stdout)
    assert data["sources"][0]["source"] == "repository" and data["sources"][0]["status"] == "ok"
    assert data["context_tokens"] <= data["context_budget"]
