"""What a board comment's text may be. A blank one asks nothing: acknowledged as ignored, not
stored (a move in the same delivery still runs). One longer than the history keeps a comment
(a pasted log) is kept, cut to its head and tail around a line saying how much was cut, and the
answer says so: refusing it lost it, since a board does not send a comment again, and it used to
be a 400 echoing pydantic's text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from cardloop.contracts.comments import MAX_COMMENT_CHARS, cut_comment
from cardloop.contracts.payloads import CardRef
from tests.cardloop.app.api.webhook_kit import ENV, generic, webhook_client
from tests.cardloop.app.api.webhook_kit import hub_signature as sign
from tests.stack import Stack

pytestmark = pytest.mark.timeout(240)
ROOMY = {**ENV, "CARDLOOP_API__MAX_BODY_BYTES": "400000"}


@pytest.fixture
async def api(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with webhook_client(stack) as client:
        yield client


async def post(api: httpx.AsyncClient, board: str, body: bytes, signature: str) -> httpx.Response:
    return await api.post(f"/webhooks/{board}", content=body,
                          headers={"content-type": "application/json", "x-hub-signature-256": signature})


def comment(card_id: str, delivery_id: str, text: str) -> bytes:
    """A generic board's comment alone (no move): generic() always names a column."""
    body = generic(card_id, "x", delivery_id, comment=text)
    return body.replace(b'"to_column": "x", ', b"")


async def a_card_that_ran(stack: Stack, api: httpx.AsyncClient, card_id: str) -> CardRef:
    """A generic card moved to review, its run over: comments now only join its history."""
    body = generic(card_id, "review", f"{card_id}-move")
    assert (await post(api, "generic", body, sign(body))).status_code == 200
    ref = CardRef(tenant="default", board="generic", card_id=card_id)
    await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    return ref


async def stored_comment(stack: Stack, ref: CardRef, starts: str) -> list[str]:
    """The card's messages that start with `starts`, once the comment has been stored (10 s at most)."""
    for _ in range(100):
        kept = [m.content for m in stack.store.messages(ref.key) if m.content.startswith(starts)]
        if kept:
            return kept
        await asyncio.sleep(0.1)
    return []


@pytest.mark.stack_env(**ROOMY)
async def test_a_blank_comment_is_ignored_and_its_move_still_runs(stack: Stack, api) -> None:
    body = generic("WEB-B1", "review", "b-1", comment=" \n\t ")
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200, r.text
    events = r.json()["events"]
    assert [(e["kind"], e["status"]) for e in events] == [("comment", "ignored"), ("transition", "accepted")]
    assert events[0]["reason"] == "the comment has no text"
    ref = CardRef(tenant="default", board="generic", card_id="WEB-B1")
    await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    assert all(m.content.strip() for m in stack.store.messages(ref.key))


@pytest.mark.stack_env(**ROOMY)
async def test_a_comment_over_the_limit_is_kept_cut_and_the_answer_says_so(stack: Stack, api) -> None:
    ref = await a_card_that_ran(stack, api, "WEB-L1")
    log = "".join(f"line {i}: step ok\n" for i in range(4_000)) + "FAILED: the cap test: 32 != 30\n"
    assert len(log) > MAX_COMMENT_CHARS
    body = comment("WEB-L1", "l-2", log)
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert event["status"] == "accepted" and f"{len(log):,}" in event["note"]
    kept = await stored_comment(stack, ref, "line 0: step ok")
    assert kept == [cut_comment(log)]
    text = kept[0]
    assert len(text) <= MAX_COMMENT_CHARS and text.endswith("FAILED: the cap test: 32 != 30\n")
    assert f"characters cut by cardloop: a comment keeps at most {MAX_COMMENT_CHARS:,}" in text


@pytest.mark.stack_env(**ROOMY)
async def test_an_empty_generic_comment_is_ignored_as_on_every_board_and_its_move_runs(stack: Stack, api) -> None:
    body = generic("WEB-B2", "review", "b-2", comment="")
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200, r.text
    events = r.json()["events"]
    assert [(e["kind"], e["status"]) for e in events] == [("comment", "ignored"), ("transition", "accepted")]
    assert events[0]["reason"] == "the comment has no text"
    ref = CardRef(tenant="default", board="generic", card_id="WEB-B2")
    await stack.cards.wait_for(ref, lambda s: s.status == "done", timeout=60)
    alone = comment("WEB-B2", "b-3", "")
    r = await post(api, "generic", alone, sign(alone))
    assert r.status_code == 200 and r.json()["events"][0]["status"] == "ignored", r.text


@pytest.mark.stack_env(**ROOMY)
async def test_a_generic_comment_over_100_000_characters_is_kept_cut_not_refused(stack: Stack, api) -> None:
    ref = await a_card_that_ran(stack, api, "WEB-L3")
    log = "".join(f"step {i}: ok\n" for i in range(9_000)) + "FAILED: the cap test: 32 != 30\n"
    assert len(log) > 100_000
    body = comment("WEB-L3", "l-3", log)
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200, r.text
    [event] = r.json()["events"]
    assert event["status"] == "accepted" and f"{len(log):,}" in event["note"]
    assert await stored_comment(stack, ref, "step 0: ok") == [cut_comment(log)]


@pytest.mark.stack_env(**ROOMY)
async def test_a_comment_at_the_limit_is_kept_whole(stack: Stack, api) -> None:
    ref = await a_card_that_ran(stack, api, "WEB-L2")
    whole = "y" * MAX_COMMENT_CHARS
    body = comment("WEB-L2", "w-2", whole)
    r = await post(api, "generic", body, sign(body))
    assert r.status_code == 200 and "note" not in r.json()["events"][0], r.text
    assert await stored_comment(stack, ref, "yyy") == [whole]


def test_cut_comment_keeps_head_and_tail_within_the_limit() -> None:
    for size in (MAX_COMMENT_CHARS + 1, 40_000, 1_000_000):
        text = "".join(chr(97 + i % 26) for i in range(size))
        cut = cut_comment(text)
        assert len(cut) <= MAX_COMMENT_CHARS
        head, _, rest = cut.partition("\n\n[... ")
        said, _, tail = rest.partition(" ...]\n\n")
        assert text.startswith(head) and text.endswith(tail) and len(head) > len(tail) > 5_000
        assert said.startswith(f"{size - len(head) - len(tail):,} of {size:,} characters cut")
    assert cut_comment("short") == "short" and cut_comment("") == ""
