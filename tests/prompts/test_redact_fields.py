"""Every field of a card that reaches a prompt, explain or a transcript is redacted, not only the
message contents (issue 17, item 10): tool-call inputs (values and keys), tool names, call ids,
message ids, authors, context titles and sources, the card's id, title and URL. Checked with
each of the redactor's families in each field, in the rendered payload of every provider
format, in explain's rows and in the summarizer's transcript."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cardloop.activities.history import transcript_line
from cardloop.prompts.card import Card, ContextItem, ContextKind, Message, ToolCall
from cardloop.prompts.formats import FORMATS
from cardloop.prompts.scrub import Scrubber
from cardloop.prompts.stages import Stage
from tests.conftest import ROOT
from tests.prompts.fake_secrets import (
    ANTHROPIC,
    AWS_KEY_ID,
    GITHUB_PAT,
    GOOGLE,
    JWT,
    OPENAI_PROJECT,
    SLACK_WEBHOOK,
    STRIPE_LIVE,
)
from tests.prompts.helpers import assemble

GITHUB = "ghp_" + "1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU"
FAMILIES = {"anthropic": ANTHROPIC, "openai": OPENAI_PROJECT, "github": GITHUB, "github-pat": GITHUB_PAT,
            "aws": AWS_KEY_ID, "jwt": JWT, "slack": SLACK_WEBHOOK, "google": GOOGLE, "stripe": STRIPE_LIVE}
# Secrets the card id pattern ([A-Za-z0-9._:#/-]) can hold.
ID_SAFE = {name: s for name, s in FAMILIES.items() if all(c.isalnum() or c in "._:#/-" for c in s)}


def card_with(secret: str, id_secret: str) -> Card:
    call = ToolCall(id=f"call:{secret}", name=f"deploy {secret}",
                    input={"token": secret, f"header {secret}": [{"nested": f"Bearer {secret}"}],
                           "command": f"deploy --token {secret}"})
    return Card(
        id=f"PAY:{id_secret}", tenant="acme", title=f"Rotate {secret}", url=f"https://ci.example/run?token={secret}",
        history=(
            Message(role="user", content="Please rotate the key.", author=f"dana {secret}", id=f"m1:{secret}"),
            Message(role="assistant", content="Deploying.", tool_calls=(call,), id=f"m2:{secret}"),
            Message(role="tool", content="deployed", tool_call_id=f"call:{secret}", id=f"m3:{secret}"),
        ),
        context=(ContextItem(kind=ContextKind.SOURCE_FILE, source=f"https://x:{secret}@git.example/a.py",
                             content="print('hi')", title=f"a.py {secret}"),
                 ContextItem(kind=ContextKind.POD_LOG, source=f"pod {secret}", content="log",
                             title=f"pod log {secret}")),  # excluded from coding: still an explain row
    )


def _leaks(text: str, secret: str) -> bool:
    # The whole secret, or any recognisable piece of it (the first 12 characters).
    return secret in text or secret[:12] in text


@pytest.mark.parametrize("family", list(FAMILIES))
def test_no_field_of_a_card_leaks_into_any_provider_format_or_explain(family: str) -> None:
    secret = FAMILIES[family]
    id_secret = ID_SAFE.get(family, GITHUB)
    prompt = assemble(card_with(secret, id_secret), Stage.CODING)
    for fmt in FORMATS:
        rendered = prompt.render(fmt)
        text = rendered if isinstance(rendered, str) else json.dumps(rendered, ensure_ascii=False)
        assert not _leaks(text, secret), fmt
        assert not _leaks(text, id_secret), fmt
        assert "[REDACTED:" in text
    explain = json.dumps(prompt.explain(), ensure_ascii=False)
    assert not _leaks(explain, secret) and not _leaks(explain, id_secret)
    assert sum(prompt.redactions.values()) >= 8


def test_call_ids_stay_paired_after_redaction() -> None:
    """The same id redacts the same way in the call and in its result, so they still match."""
    scrubber = Scrubber()
    c = card_with(GITHUB, GITHUB)
    call, result = scrubber.scrub_message(c.history[1]), scrubber.scrub_message(c.history[2])
    assert call.tool_calls[0].id == result.tool_call_id and GITHUB not in (result.tool_call_id or "")


def test_the_summarizers_transcript_is_redacted_in_every_field() -> None:
    scrubber = Scrubber()
    c = card_with(GITHUB, GITHUB)
    lines = [transcript_line(i, clean, clean.content)
             for i, clean in enumerate(scrubber.scrub_message(m) for m in c.history)]
    assert not any(_leaks(line, GITHUB) for line in lines)
    assert "[REDACTED:github-token]" in lines[1]


def test_explain_text_and_json_never_print_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "card.json"
    path.write_text(card_with(GITHUB, GITHUB).model_dump_json())
    cli = Path(sys.executable).parent / "cardloop"
    for extra in ((), ("--json",), ("--provider", "all")):
        out = subprocess.run([str(cli), "prompt", "explain", "--card", str(path), "--stage", "coding", *extra],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert out.returncode == 0, out.stderr
        assert not _leaks(out.stdout, GITHUB), extra
        assert "[REDACTED:github-token]" in out.stdout


def test_explain_names_the_item_each_secret_was_in_also_when_assembled_again(counter) -> None:
    from cardloop.prompts.assemble import AssemblyRequest
    from tests.prompts.helpers import assembler, item, settings

    c = Card(id="PAY-9", tenant="acme", title="Rotate the key", history=(
        Message(role="user", content="Plan it.", author="maria"),
        Message(role="assistant", content=f"I will use {GITHUB} for now."),
    ), context=(item(ContextKind.BUILD_LOG, f"export AWS_ACCESS_KEY_ID={AWS_KEY_ID}", source="ci run 7"),))
    asm = assembler(counter=counter)
    request = AssemblyRequest(card=c, stage=Stage.ERROR_FIXING, request_system=f"key {ANTHROPIC}")
    cold = asm.assemble(request, settings()).explain()
    warm = asm.assemble(request, settings()).explain()  # served from the caches: same answer
    assert cold["redacted_in"] == warm["redacted_in"]
    where = {(h["item"], h["count"]) for h in cold["redacted_in"]}
    assert where == {("request system prompt", 1), ("history message 2 (assistant)", 1),
                     ("context build_log: ci run 7", 1)}
    assert sum(h["count"] for h in cold["redacted_in"]) == sum(cold["redactions"].values())
