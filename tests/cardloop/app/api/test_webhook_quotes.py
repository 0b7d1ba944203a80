"""A person's comment quoting cardloop's comment, marker line and all, is the person's: the
answer to a blocked run's question often quotes it. Through the real app and Temporal with
Jira's real comment_created delivery (an ADF body with a blockquote, or the wiki markup string
Jira's webhooks send, with a {quote} block): the answer is taken and the blocked stage runs
again. cardloop's own comment coming back (its marker a line of its own, unquoted) still starts
nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cardloop.app.boards.jira import adf_text
from cardloop.contracts.payloads import CardRef
from cardloop.integrations.board_clients.base import is_own_comment
from cardloop.prompts.card import Card
from tests.cardloop.app.api.webhook_kit import ENV, Clock, hub_signature, webhook_client
from tests.cardloop.app.boards.conftest import fixture_json
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)
REF = CardRef(tenant="default", board="jira", card_id="PAY-142")
MARKER = f"cardloop:{REF.key}/1/ended"
QUESTION = "cardloop · planning (run 1) is blocked. Question for the team: which timeout, 30s or 60s?"
ANSWER = "Use 30 seconds, as the ADR says."


def paragraph(text: str) -> dict[str, Any]:
    return {"type": "paragraph", "content": [{"type": "text", "text": text}]}


def quoting_reply() -> dict[str, Any]:
    """What Jira's editor makes of a reply that quotes cardloop's comment: a blockquote, then the answer."""
    return {"type": "doc", "version": 1, "content": [
        {"type": "blockquote", "content": [paragraph(QUESTION), paragraph(MARKER)]}, paragraph(ANSWER)]}


async def comment_on_jira(stack: Stack, body: Any, author: str = "Priya Patel", delivery: str = "j-1") -> dict:
    payload = fixture_json("jira/comment_created.json")
    payload["comment"].update(body=body, id=delivery)
    payload["comment"]["author"]["displayName"] = author
    raw = json.dumps(payload).encode()
    async with webhook_client(stack, clock=Clock(payload["timestamp"] / 1000)) as api:
        r = await api.post("/webhooks/jira", content=raw, headers={
            "content-type": "application/json", "x-hub-signature": hub_signature(raw),
            "x-atlassian-webhook-identifier": delivery})
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    return event


@pytest.mark.stack_env(**ENV, CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_an_answer_quoting_cardloops_blocked_question_runs_the_stage_again(stack: Stack) -> None:
    stack.model.transcript["planning"] = ["<promise>BLOCKED</promise> which timeout, 30s or 60s?",
                                          "Plan: a 30 s timeout.\n<promise>COMPLETE</promise>"]
    stack.cards.import_card(Card(id="PAY-142", tenant="default", board="jira", title="Retry failed payouts"))
    await stack.cards.move(REF, "planning", delivery_id="m-1")
    await stack.cards.wait_for(REF, lambda s: s.status == "blocked", timeout=60)

    event = await comment_on_jira(stack, quoting_reply())
    assert event["status"] == "accepted", event
    state = await stack.cards.wait_for(REF, lambda s: s.stage_runs == 2 and s.status != "running", timeout=60)
    assert [(r.stage, r.outcome) for r in state.history] == [("planning", "blocked"), ("planning", "completed")]
    [stored] = [m for m in stack.store.messages(REF.key) if ANSWER in m.content]
    assert stored.author == "Priya Patel" and stored.content == f"> {QUESTION}\n> {MARKER}\n\n{ANSWER}"


@pytest.mark.stack_env(**ENV)
async def test_a_wiki_markup_quote_is_the_persons_and_cardloops_own_comment_is_still_its_echo(stack: Stack) -> None:
    stack.cards.import_card(Card(id="PAY-142", tenant="default", board="jira", title="Retry failed payouts"))
    wiki = f"{{quote}}\n{QUESTION}\n{MARKER}\n{{quote}}\n{ANSWER}"
    event = await comment_on_jira(stack, wiki, delivery="j-2")
    assert event["status"] == "accepted", event

    # cardloop's own comment as its Jira client writes it: the marker, unquoted, its last paragraph.
    ours = {"type": "doc", "version": 1, "content": [paragraph(QUESTION), paragraph(MARKER)]}
    echo = await comment_on_jira(stack, ours, author="cardloop bot", delivery="j-3")
    assert echo["status"] == "ignored" and "carries a cardloop marker" in echo["reason"]


def test_a_marker_inside_a_quote_never_makes_a_comment_cardloops() -> None:
    theirs = [f"> {QUESTION}\n> {MARKER}\n\n{ANSWER}",               # markdown: GitHub, Linear, Trello, generic
              f">> {MARKER}\n> earlier\n{ANSWER}",                  # a quote in a quote
              f"> <!-- {MARKER} -->\n{ANSWER}",                      # GitHub's hidden marker, quoted
              f"{{quote}}{QUESTION}\n{MARKER}{{quote}}\n{ANSWER}",  # Jira wiki markup
              f"{{QUOTE}}\n{MARKER}\n{{QUOTE}}",
              adf_text(quoting_reply())]                              # Jira ADF, as the adapter renders it
    assert [t for t in theirs if is_own_comment(t)] == []
    ours = [f"Done.\n\n{MARKER}", f"Done.\n<!-- {MARKER} -->", f"{{quote}}{ANSWER}{{quote}}\n{MARKER}",
            adf_text({"type": "doc", "content": [paragraph("Done."), paragraph(MARKER)]})]
    assert all(is_own_comment(t) for t in ours)
