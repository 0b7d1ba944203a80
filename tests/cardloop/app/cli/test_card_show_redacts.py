"""The card's history and its runs' reasons are stored as the board and the model sent them
(README, Secrets); `card show` (text and --json) and `card move --follow` are ways out of the
store, so each redacts what it prints, before anything is shortened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import cardloop, cli_env
from tests.stack import Stack, small_card

pytestmark = pytest.mark.timeout(180)

# Fakes of the right shapes (none is real): a GitHub token, an AWS key pair, a database password.
GITHUB_TOKEN = "ghp_8x2Kd9LmQ3vR7tYp1ZsW4nB6cE0fH5jU2aXo"
AWS_SECRET = "zT8kQ2mVx9LpR4wN7cB1yH6jF3dS0aG5eK8uI2oP"
DB_PASSWORD = "Tr0ub4dor-Zebra-92"
SECRETS = (GITHUB_TOKEN, AWS_SECRET, DB_PASSWORD)


def _leaks(text: str) -> list[str]:
    # Any 12 characters of a secret count: a cut secret printed in part is still a leak.
    return [s for s in SECRETS if any(s[i:i + 12] in text for i in range(len(s) - 11))]


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_show_and_follow_print_no_secret_from_the_history_or_a_reason(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("SHOWSEC-1"))
    said = await cardloop(env, "card", "say", ref.key, "--author", "priya",
                          f"Use GITHUB_TOKEN={GITHUB_TOKEN} and the db "
                          f"postgresql://payments:{DB_PASSWORD}@db.internal:5432/payments " + "x" * 200)
    assert said.returncode == 0, said.stdout + said.stderr
    stack.model.transcript["planning"] = [
        f"The deploy key AKIAQYLPMN5HHHFPZAM2 with secret {AWS_SECRET} was refused.\n"
        f"<promise>BLOCKED</promise> GITHUB_TOKEN={GITHUB_TOKEN} has no write access"]
    followed = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--follow")
    assert followed.returncode == 3, followed.stdout + followed.stderr
    assert "[REDACTED:" in followed.stdout and not _leaks(followed.stdout), followed.stdout

    shown = await cardloop(env, "card", "show", ref.key, "--last", "5")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "[priya] " not in shown.stdout and "[user] priya: Use GITHUB_TOKEN=[REDACTED:" in shown.stdout
    assert "blocked" in shown.stdout and not _leaks(shown.stdout), shown.stdout

    as_json = await cardloop(env, "card", "show", ref.key, "--last", "5", "--json")
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    doc = json.loads(as_json.stdout)
    assert not _leaks(as_json.stdout), as_json.stdout
    assert any("[REDACTED:" in m["content"] for m in doc["messages"])
    assert "[REDACTED:" in doc["state"]["history"][-1]["reason"]
    # The store keeps what was sent: the redaction is on the way out, not a loss.
    stored = stack.store.messages(ref.key)
    assert any(GITHUB_TOKEN in m.content for m in stored)
